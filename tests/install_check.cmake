# Installs BUILD into PREFIX and runs the installed dsv4h verify --backend cpu from PREFIX (no
# fixtures folder there or above it): it must find the installed fixtures and pass them.
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD}" --prefix "${PREFIX}" RESULT_VARIABLE code OUTPUT_QUIET)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "cmake --install exited ${code}")
endif()
execute_process(COMMAND "${PREFIX}/bin/dsv4h" verify --backend cpu WORKING_DIRECTORY "${PREFIX}"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0 OR NOT out MATCHES "[1-9][0-9]* passed, 0 failed" OR NOT err MATCHES "share/dsv4h/fixtures")
  message(FATAL_ERROR "installed dsv4h verify: exit ${code}\n${out}\n${err}")
endif()
# The peers, beside the suite's scripts as in the source tree (gpu-suite runs tests/peers/<component>.py).
foreach(peer tests/peers/filtered_silu_mul.py tests/peers/peer_timing.py ci/legacy_peers.py ci/torch_ceiling.py)
  if(NOT EXISTS "${PREFIX}/share/dsv4h/${peer}")
    message(FATAL_ERROR "cmake --install: no share/dsv4h/${peer}")
  endif()
endforeach()
message("${out}")
# Every ci/ script the installed GPU suite calls is installed beside it.
file(READ "${PREFIX}/share/dsv4h/ci/gpu-suite" suite)
string(REGEX REPLACE "\n[ \t]*#[^\n]*" "" suite "${suite}")  # its comments name other scripts
string(REGEX MATCHALL "ci/[A-Za-z0-9_.-]+" called "${suite}")
list(REMOVE_DUPLICATES called)
foreach(script IN LISTS called)
  if(NOT EXISTS "${PREFIX}/share/dsv4h/${script}")
    message(FATAL_ERROR "the installed ci/gpu-suite calls ${script}, which the install rules leave out")
  endif()
endforeach()
