# Build-time revision: writes OUT (git_rev.h) with the commit the binary is built from, "-dirty" when tracked files
# differ from it; rewrites the file only when the text changes, so an unchanged revision recompiles nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE rev
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SRC} RESULT_VARIABLE dirty)
  if(NOT dirty EQUAL 0)
    set(rev "${rev}-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_rev.cmake.\n#pragma once\n#define DAEI_GIT_REV \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
