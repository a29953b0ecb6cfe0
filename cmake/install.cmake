# `cmake --install`: the public headers, one static library holding every
# src/ folder's objects (libweightlift.a), the `weightlift` command, and a
# CMake package, so that a consumer writes
#   find_package(weightlift CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE weightlift::weightlift)
# and gets the include path, C++20 and the link dependencies (Threads,
# liburing and the static CUDA runtime when they were compiled in) without
# setting anything itself. tests/consumer is such a consumer (ctest
# install.consumer builds and runs it against a temporary prefix).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The folders' libraries, in link order (each depends only on later ones).
set(WL_INSTALLED_PARTS wl_loader wl_cuda wl_exec wl_plan wl_io wl_format
                       wl_util)
add_library(weightlift_static STATIC)
foreach(part ${WL_INSTALLED_PARTS})
  target_sources(weightlift_static PRIVATE $<TARGET_OBJECTS:${part}>)
endforeach()
set_target_properties(weightlift_static PROPERTIES
  OUTPUT_NAME weightlift EXPORT_NAME weightlift LINKER_LANGUAGE CXX)
target_include_directories(weightlift_static INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(weightlift_static INTERFACE cxx_std_20)
target_link_libraries(weightlift_static INTERFACE Threads::Threads
                      ${CMAKE_DL_LIBS})
if(WL_HAVE_URING)  # found again by the package config on the consumer's side
  target_link_libraries(weightlift_static INTERFACE
    $<BUILD_INTERFACE:${URING_LIBRARY}> $<INSTALL_INTERFACE:weightlift::uring>)
endif()
if(WL_HAVE_CUDA)
  target_link_libraries(weightlift_static INTERFACE CUDA::cudart_static)
endif()

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
