# ctest install.consumer: installs the build tree into a temporary prefix,
# writes a small checkpoint with the real safetensors package, configures
# and builds tests/consumer against the prefix alone, and runs it.
#   cmake -DBUILD_DIR=.. -DWORK_DIR=.. -DPYTHON=.. -P run_consumer_test.cmake
foreach(v BUILD_DIR WORK_DIR PYTHON)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_consumer_test.cmake: -D${v}= is required")
  endif()
endforeach()
set(here ${CMAKE_CURRENT_LIST_DIR})
file(REMOVE_RECURSE ${WORK_DIR})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR}
     --prefix ${WORK_DIR}/prefix)
foreach(f include/weightlift/loader.h lib*/libweightlift.a
          lib*/cmake/weightlift/weightlift-config.cmake bin/weightlift)
  file(GLOB found ${WORK_DIR}/prefix/${f})
  if(NOT found)
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
step("checkpoint" ${PYTHON} ${here}/make_checkpoint.py ${WORK_DIR}/ckpt)
# Only the prefix is searched: nothing of the source or build tree leaks in.
step("configure consumer" ${CMAKE_COMMAND} -S ${here} -B ${WORK_DIR}/build
     -G Ninja -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
     -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run consumer" ${WORK_DIR}/build/consumer ${WORK_DIR}/ckpt)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "consumer: 2 tensors from 2 files")
  message(FATAL_ERROR "consumer output unexpected:\n${step_output}")
endif()
