# `cmake --install`: the public headers, one static library holding every
# src/ folder's objects (libweightlift.a), the `weightlift` command, and a
# CMake package, so that a consumer writes
#   find_package(weightlift CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE weightlift::weightlift)
# and gets the include path, C++20 and the link dependencies (Threads, and
# liburing, the static CUDA runtime, libcurl and OpenSSL when they were
# compiled in) without setting anything itself. tests/consumer is such a
# consumer (ctest install.consumer builds and runs it against a temporary
# prefix).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The folders' libraries that `weightlift` links, found by walking its link
# dependencies (so a new folder library is picked up without editing this
# file), and what they link from outside: imported targets (Threads::,
# CUDA::, ...) and plain libraries (dl, a liburing path).
set(WL_PARTS)
set(WL_EXTERNAL_TARGETS)
set(WL_EXTERNAL_LIBS)
function(wl_collect target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(deps ${target} INTERFACE_LINK_LIBRARIES)
  else()
    get_target_property(deps ${target} LINK_LIBRARIES)
  endif()
  if(NOT deps)
    return()
  endif()
  foreach(dep ${deps})
    if(TARGET ${dep})
      get_target_property(imported ${dep} IMPORTED)
      get_target_property(dep_type ${dep} TYPE)
      if(imported)
        # Header-only imported targets (nlohmann_json) add nothing to a link.
        if(NOT dep_type STREQUAL "INTERFACE_LIBRARY" OR
           dep STREQUAL "Threads::Threads")
          list(APPEND WL_EXTERNAL_TARGETS ${dep})
        endif()
      elseif(NOT dep IN_LIST WL_PARTS)
        if(dep_type STREQUAL "STATIC_LIBRARY")
          list(APPEND WL_PARTS ${dep})
        endif()
        wl_collect(${dep})
      endif()
    elseif(NOT dep MATCHES "^\\$<")
      list(APPEND WL_EXTERNAL_LIBS ${dep})
    endif()
  endforeach()
  foreach(v WL_PARTS WL_EXTERNAL_TARGETS WL_EXTERNAL_LIBS)
    list(REMOVE_DUPLICATES ${v})
    set(${v} ${${v}} PARENT_SCOPE)
  endforeach()
endfunction()
wl_collect(weightlift)

add_library(weightlift_static STATIC)
foreach(part ${WL_PARTS})
  target_sources(weightlift_static PRIVATE $<TARGET_OBJECTS:${part}>)
endforeach()
set_target_properties(weightlift_static PROPERTIES
  OUTPUT_NAME weightlift EXPORT_NAME weightlift LINKER_LANGUAGE CXX)
target_include_directories(weightlift_static INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(weightlift_static INTERFACE cxx_std_20)

# Imported targets travel by name; the package config finds their packages
# again on the consumer's side (WL_FIND_DEPENDENCIES).
set(WL_FIND_DEPENDENCIES "")
set(WL_PACKAGE_OF_Threads Threads)
set(WL_PACKAGE_OF_CUDA CUDAToolkit)
set(WL_PACKAGE_OF_CURL CURL)
set(WL_PACKAGE_OF_OpenSSL OpenSSL)
set(packages)
foreach(dep ${WL_EXTERNAL_TARGETS})
  string(REGEX REPLACE "::.*" "" ns ${dep})
  if(NOT DEFINED WL_PACKAGE_OF_${ns})
    message(FATAL_ERROR "cmake/install.cmake: the library links ${dep}; "
                        "add its package to WL_PACKAGE_OF_${ns}")
  endif()
  list(APPEND packages ${WL_PACKAGE_OF_${ns}})
  target_link_libraries(weightlift_static INTERFACE ${dep})
endforeach()
list(REMOVE_DUPLICATES packages)
foreach(p ${packages})
  string(APPEND WL_FIND_DEPENDENCIES "find_dependency(${p})\n")
endforeach()
# Plain libraries: a full path (liburing found at configure time) becomes
# its name on the consumer's side, found on the linker's search path.
foreach(lib ${WL_EXTERNAL_LIBS})
  if(IS_ABSOLUTE ${lib})
    get_filename_component(name ${lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" name ${name})
    target_link_libraries(weightlift_static INTERFACE
      $<BUILD_INTERFACE:${lib}> $<INSTALL_INTERFACE:${name}>)
  else()
    target_link_libraries(weightlift_static INTERFACE ${lib})
  endif()
endforeach()
message(STATUS "weightlift: installed library holds ${WL_PARTS}; links "
               "${WL_EXTERNAL_TARGETS} ${WL_EXTERNAL_LIBS}")

install(TARGETS weightlift_static EXPORT weightlift-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/weightlift
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET weightlift_cli)
  install(TARGETS weightlift_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(WL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/weightlift)
install(EXPORT weightlift-targets NAMESPACE weightlift::
  DESTINATION ${WL_CMAKE_DIR})
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/weightlift-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weightlift-config.cmake
  INSTALL_DESTINATION ${WL_CMAKE_DIR})
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/weightlift-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weightlift-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/weightlift-config-version.cmake
  DESTINATION ${WL_CMAKE_DIR})
