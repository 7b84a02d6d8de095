# Runs COMMAND with ARGS (separated by "|"; "<bar>" in one stands for "|") and requires exit code
# EXPECTED and REGEX in its output.
# Optional: QUIET_STDOUT (stdout must be empty: errors go to stderr), ABSENT (a file that must not
# exist afterwards; removed first).
string(REPLACE "|" ";" ARGS "${ARGS}")
string(REPLACE "<bar>" "|" ARGS "${ARGS}")
if(ABSENT)
  file(REMOVE "${ABSENT}")
endif()
execute_process(COMMAND ${COMMAND} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code STREQUAL EXPECTED)
  message(FATAL_ERROR "exit ${code}, expected ${EXPECTED}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
  message(FATAL_ERROR "output does not match '${REGEX}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(QUIET_STDOUT AND NOT out STREQUAL "")
  message(FATAL_ERROR "stdout is not empty (errors go to stderr)\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(ABSENT AND EXISTS "${ABSENT}")
  message(FATAL_ERROR "${ABSENT} was written\nstdout:\n${out}\nstderr:\n${err}")
endif()
message("${out}${err}")
