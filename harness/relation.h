// Consistency relations: checks that compare runs of one component with each other rather than with
// a reference, and hold on the reference and on the GPU alike. Each relation runs the whole batch
// once and the same work again as pieces (sub-batches from the component's slice_batch hook); the
// pieces' outputs must equal the whole run's rows bit for bit, and, where the pieces run as
// successive steps, the state they leave (the component's state_outputs) must equal the whole's.
//
//   batch_invariance(chunks=K): a request's outputs do not depend on its neighbours: one random
//       request alone, and a random split into K contiguous chunks, each run on fresh outputs.
//   split(at=A,every=E): the same work as one step or as several (prefill vs chunked prefill vs
//       token-by-token decode): rows [0, A) then [A, n) (A in (0, n)), or pieces of E rows
//       (E = 1: one row a step), each starting from the state the previous one left.
//
// A relation case names the relation, its parameters and the component case it holds for:
//
//   RELATION[(key=value,...)]:COMPONENT_CASE
//   e.g. batch_invariance(chunks=3):filtered_silu_mul(rows=77,seed=3)
//        split(at=100):memory_pool(tokens=300,per_request=300,seed=1)
//
// Missing parameters take their defaults; the random choices come from the component case's seed.
// The canonical string (every parameter, the seed) names the result and reproduces it:
// `dsv4h run --case '<relation case>'`.
#pragma once

#include <string>

#include "case_spec.h"
#include "component.h"
#include "gpu_backend.h"
#include "verify.h"

namespace dsv4h {

struct RelationCase {
  Case relation;  // the relation's parameters, as a case of the relation's name
  Case subject;   // the component case it holds for
  std::string str() const;  // canonical
};

// Whether `text` is a relation case (a ':' outside parentheses) rather than a component case.
bool is_relation_case(const std::string& text);

// BadInput naming the unknown relation, parameter or component.
RelationCase parse_relation_case(const std::string& text, uint64_t default_seed = 1);

// Runs the relation on the reference and, when `gpu` is given, on the GPU; the result's checks are
// labelled "<backend>: <pieces>" and its reproduction line is `dsv4h run --case '<case>'`.
CaseResult run_relation(const Component& component, const RelationCase& rc, GpuBackend* gpu);

}  // namespace dsv4h
