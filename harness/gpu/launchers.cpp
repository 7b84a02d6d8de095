#include "launchers.h"

#include "../components/all_components.h"

namespace dsv4h {

void attach_gpu_launchers(Registry& registry) {
  registry.get_mutable("filtered_silu_mul").gpu = launch_filtered_silu_mul_case;
  registry.get_mutable("attn_metadata").gpu = launch_attn_metadata_case;
  registry.get_mutable("mtp_expand").gpu = launch_mtp_expand_case;
  registry.get_mutable("memory_pool").gpu = launch_memory_pool_case;
}

}  // namespace dsv4h
