# The model-level mutants (issue 31: the spec's review findings as the model runs them), each a
# test binary of tests/gpu/model_mutant_check.cpp that passes when bisection names the op the bug
# is in, or the decode step's capture fails loudly: `ctest -L model_mutant` on a GPU machine.
# Included by tests/gpu/CMakeLists.txt. An entry is NAME:kernels, a component's kernel mutant reused
# (its dsv4h_kernels_mutant_NAME library, the model's GPU path as it is), or NAME:model, a mutant of
# the model's own decode step (decode_step.cpp compiled with DSV4H_MUTANT_NAME, the real kernels).
set(DSV4H_MODEL_MUTANTS
  meta_full_shape_copy:kernels       # finding 2: the metadata's tail rows left stale (partial-batch copy)
  meta_padding_item:kernels          # finding 1: .item() inside the step: the capture must fail
  clamp_missing:kernels              # spec 8.2: the SwiGLU clamp not applied
  model_cached_translation:model     # finding 5: the store's page-slot translation cached across steps
  model_mtp_zero_pad:model)          # finding 3: the MTP block's rows zero-padded
if(NOT DSV4H_MUTANTS)
  return()
endif()
foreach(entry IN LISTS DSV4H_MODEL_MUTANTS)
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 mutant)
  list(GET parts 1 where)
  string(TOUPPER ${mutant} upper)
  if(where STREQUAL "kernels")
    if(NOT mutant IN_LIST DSV4H_MUTANT_NAMES)
      message(FATAL_ERROR "model mutant ${mutant}: no component declares a kernel mutant of that name")
    endif()
    set(model_lib dsv4h_model_gpu)
    set(kernels dsv4h_kernels_mutant_${mutant})
  else()
    dsv4h_model_gpu_variant(dsv4h_model_gpu_mutant_${mutant} DSV4H_MUTANT_${upper})
    set(model_lib dsv4h_model_gpu_mutant_${mutant})
    set(kernels dsv4h_kernels)
  endif()
  add_executable(test_model_mutant_${mutant} ${PROJECT_SOURCE_DIR}/tests/gpu/model_mutant_check.cpp)
  target_include_directories(test_model_mutant_${mutant} PRIVATE ${PROJECT_SOURCE_DIR}/tests/gpu)
  target_compile_definitions(test_model_mutant_${mutant} PRIVATE DSV4H_MODEL_MUTANT="${mutant}")
  target_link_libraries(test_model_mutant_${mutant} PRIVATE dsv4h_property dsv4h_core ${model_lib} ${kernels} GTest::gtest_main)
  install(TARGETS test_model_mutant_${mutant} RUNTIME DESTINATION ${DSV4H_SUITE_DIR})
  # One ctest a binary (every binary holds the same test name, which discovery would repeat); a
  # skip for want of a GPU is reported as one.
  add_test(NAME model_mutant_${mutant}_is_caught COMMAND test_model_mutant_${mutant})
  set_tests_properties(model_mutant_${mutant}_is_caught PROPERTIES LABELS "gpu;mutant;model_mutant"
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" RESOURCE_GROUPS gpus:1 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()
