// The GPU forward's op plumbing (forward_impl.h): an op's outputs reported to the observer (and
// written back where it changed them), the GEMMs (cuBLAS, or the plain GEMM on AMD) and the norms.
#include "forward_impl.h"

#include "glue_kernels.h"
#include "kernels/rms_norm.h"

namespace dsv4h::model::gpu {

void GpuForward::report(const std::string& op, std::vector<ReportedOutput> outputs) const {
  if (!observer_) return;  // a benchmark's run (step_bench.h): nothing read back
  std::vector<RowMatrix> values, before;
  for (const ReportedOutput& o : outputs) values.push_back(o.read ? o.read() : download(o.view, stream_));
  before = values;
  std::vector<OpOutput> out;
  for (size_t i = 0; i < outputs.size(); ++i) out.push_back({outputs[i].name, &values[i], outputs[i].values});
  observer_->op(op, {}, out);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (same_bits(values[i], before[i])) continue;
    if (values[i].rows() != before[i].rows() || values[i].cols() != before[i].cols())
      fail("the observer of " + op + " resized its output " + outputs[i].name);
    if (outputs[i].write) {
      outputs[i].write(values[i]);
    } else if (!outputs[i].read) {
      write_back(values[i], outputs[i].view, stream_);
    } else {
      fail("the observer changed " + op + "'s output " + outputs[i].name +
           ", which the GPU forward cannot write back (fp8 codes with their scales)");
    }
  }
}

void GpuForward::gemm(const void* x, Dtype in, int64_t ldx, const void* w, int64_t ldw, void* y, Dtype out, int64_t ldy,
                      int64_t rows, int64_t k, int64_t n, float alpha) const {
  if (rows == 0) return;
  // A decode step's few rows as a GEMV where the shapes allow it: cuBLAS took 201 of the tiny
  // model's 1020 us at bs 1 in 53 such GEMMs (H100, 2026-12-07), some 3.8 us each.
  if (rows <= gpu::kSkinnyRows) {
    bool done = false;
    if (in == Dtype::bf16 && out == Dtype::bf16)
      done = gpu::launch_skinny_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw,
                                     static_cast<uint16_t*>(y), ldy, rows, k, n, alpha, stream_);
    else if (in == Dtype::bf16)
      done = gpu::launch_skinny_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw,
                                     static_cast<float*>(y), ldy, rows, k, n, alpha, stream_);
    else
      done = gpu::launch_skinny_gemm(static_cast<const float*>(x), ldx, static_cast<const float*>(w), ldw,
                                     static_cast<float*>(y), ldy, rows, k, n, alpha, stream_);
    if (done) return;
  }
#if defined(DSV4H_GPU_NVIDIA)
  if (blas_) {
    // Row-major y [rows, n] = x [rows, k] W^T is column-major y^T [n, rows] = W^T' x^T': W as stored
    // is column-major [k, n] (ld ldw), transposed; x column-major [k, rows] (ld ldx).
    const float beta = 0.f;
    const cudaDataType_t tin = in == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t tout = out == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = in == Dtype::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
    const cublasStatus_t status = blas_library_->gemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                               static_cast<int>(k), &alpha, w, tin, static_cast<int>(ldw), x, tin,
                                               static_cast<int>(ldx), &beta, y, tout, static_cast<int>(ldy), compute,
                                               CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) fail("cublasGemmEx failed (status " + std::to_string(static_cast<int>(status)) + ")");
    return;
  }
#endif
  if (in == Dtype::bf16 && out == Dtype::bf16)
    gpu::launch_plain_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw, static_cast<uint16_t*>(y),
                           ldy, rows, k, n, alpha, stream_);
  else if (in == Dtype::bf16)
    gpu::launch_plain_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw, static_cast<float*>(y), ldy,
                           rows, k, n, alpha, stream_);
  else
    gpu::launch_plain_gemm(static_cast<const float*>(x), ldx, static_cast<const float*>(w), ldw, static_cast<float*>(y), ldy,
                           rows, k, n, alpha, stream_);
}

GpuForward::Buf GpuForward::linear(const uint16_t* x, int64_t rows, const std::string& name, Dtype out_dtype, float alpha) const {
  const int64_t n = shape(name).at(0), k = shape(name).at(1);
  Buf y(static_cast<size_t>(std::max<int64_t>(rows * n, 1)) * dtype_bytes(out_dtype));
  gemm(x, Dtype::bf16, k, bf16(name), k, y.as<void>(), out_dtype, n, rows, k, n, alpha);
  return y;
}

GpuForward::Buf GpuForward::rms_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name) const {
  Buf y = device_array<uint16_t>(rows * dim);
  if (rows > 0) launch_rms_norm({x, f32(weight_name), y.as<uint16_t>(), rows, dim, static_cast<float>(c_.norm_eps)}, stream_);
  return y;
}

GpuForward::Buf GpuForward::report_linear(const uint16_t* x, int64_t rows, const std::string& weight_name, const std::string& op,
                                          Dtype out, float alpha, const char* output) const {
  Buf y = linear(x, rows, weight_name, out, alpha);
  const int64_t n = shape(weight_name).at(0);
  report(op, {{output, {y.as<void>(), out, rows, n, n}}});
  return y;
}

GpuForward::Buf GpuForward::report_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name,
                                        const std::string& op) const {
  Buf y = rms_norm(x, rows, dim, weight_name);
  report(op, {{"y", {y.as<void>(), Dtype::bf16, rows, dim, dim}}});
  return y;
}

}  // namespace dsv4h::model::gpu
