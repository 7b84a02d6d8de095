"""The torch peers of the records before tests/peers/ (`torch_peers`, `torch_peers_more`, written by
the ci/torch_peer*.py of then), read as the results of tests/peers/<component>.py, so that the
goals on "peers.<component>" judge an old record too. Only these four components had peers then;
a new component has nothing here.

- filtered_silu_mul: torch_peers.peers [{rows, inter, eager_us, compile_us}]. The torch expression
  computes every row, so its times stand for each kept fraction of the benchmark (as today's
  script's eager and compile times do).
- attn_metadata, mtp_expand: torch_peers_more.metadata.<component> [{..., eager_us, graph_us}], as they are.
- memory_pool: torch_peers_more.memory_pool.memory_pool [{tokens, store_us, gather_us}]: eager torch
  at shuffled slots (scatter 1), one result an op.
"""

KEPT_PERMILLE = (1000, 500, 125)


def results(report, component):
    torch = report.get("torch_peers") or {}
    more = report.get("torch_peers_more") or {}
    if component == "filtered_silu_mul":
        return [{"rows": p["rows"], "kept_permille": kept, "eager_us": p["eager_us"], "compile_us": p["compile_us"]}
                for p in torch.get("peers", []) for kept in KEPT_PERMILLE]
    if component in ("attn_metadata", "mtp_expand"):
        return list(more.get("metadata", {}).get(component, []))
    if component == "memory_pool":
        return [{"op": op, "tokens": p["tokens"], "scatter": 1, "eager_us": p[op + "_us"]}
                for p in more.get("memory_pool", {}).get("memory_pool", []) for op in ("store", "gather")]
    return []
