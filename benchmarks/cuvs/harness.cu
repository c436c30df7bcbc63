// cuVS as a peer of the distances and knn suites (python -m benchmarks): its sparse pairwise distances and sparse brute-force kNN,
// timed on the CSR matrices the benchmark wrote (the same inputs as ours, in the same run).
//
//   cuvs_harness pairwise DIR REPEATS METRIC[:ARG],...   Q (DIR/q.*) against X (DIR/x.*), one line per metric
//   cuvs_harness knn DIR REPEATS K METRIC,...            every row of X against X, its K nearest
//
// DIR holds, for each of q and x: NAME.shape (text "rows cols nnz"), NAME.indptr and NAME.indices (int32),
// NAME.data (float32); for pairwise also sample.rows (int32 row numbers of Q whose distances are written back).
// METRIC is a cuvs::distance::DistanceType name (L1, CosineExpanded, ...), ARG its metric_arg (Minkowski's p).
// Each result is one JSON line on stdout: the median of REPEATS calls between CUDA events on the handle's stream,
// after one warm-up call, with the output preallocated; pairwise writes the sample rows of its output to
// DIR/out_METRIC.f32, knn its distances and neighbours to DIR/knn_METRIC.{f32,i32}.  A metric cuVS refuses gives
// {"metric": ..., "error": ...} and the next one runs.
//
// Build (benchmarks/cuvs/build.sh): nvcc -std=c++20 against the libcuvs-cu13 wheel's headers and libcuvs.so.

#include <cuvs/distance/distance.hpp>
#include <cuvs/neighbors/brute_force.hpp>
#include <raft/core/device_csr_matrix.hpp>
#include <raft/core/device_mdspan.hpp>
#include <raft/core/device_resources.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#define CHECK_CUDA(call)                                                                             \
  do {                                                                                               \
    cudaError_t err_ = (call);                                                                       \
    if (err_ != cudaSuccess)                                                                         \
      throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(err_));                \
  } while (0)

using cuvs::distance::DistanceType;

namespace {

const std::map<std::string, DistanceType> kMetrics = {
  {"L2Expanded", DistanceType::L2Expanded},
  {"L2SqrtExpanded", DistanceType::L2SqrtExpanded},
  {"L2Unexpanded", DistanceType::L2Unexpanded},
  {"L2SqrtUnexpanded", DistanceType::L2SqrtUnexpanded},
  {"CosineExpanded", DistanceType::CosineExpanded},
  {"L1", DistanceType::L1},
  {"InnerProduct", DistanceType::InnerProduct},
  {"Linf", DistanceType::Linf},
  {"Canberra", DistanceType::Canberra},
  {"LpUnexpanded", DistanceType::LpUnexpanded},
  {"CorrelationExpanded", DistanceType::CorrelationExpanded},
  {"JaccardExpanded", DistanceType::JaccardExpanded},
  {"HellingerExpanded", DistanceType::HellingerExpanded},
  {"JensenShannon", DistanceType::JensenShannon},
  {"HammingUnexpanded", DistanceType::HammingUnexpanded},
  {"KLDivergence", DistanceType::KLDivergence},
  {"RusselRaoExpanded", DistanceType::RusselRaoExpanded},
  {"DiceExpanded", DistanceType::DiceExpanded},
};

template <typename T>
std::vector<T> read_file(const std::string& path, size_t count)
{
  std::vector<T> v(count);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(T)));
  if (static_cast<size_t>(f.gcount()) != count * sizeof(T)) throw std::runtime_error("short file " + path);
  return v;
}

template <typename T>
void write_file(const std::string& path, const std::vector<T>& v)
{
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

template <typename T>
T* to_device(const std::vector<T>& v)
{
  T* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, std::max<size_t>(1, v.size()) * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

/** A CSR matrix read from DIR/NAME.* into device memory (int32 indices, float32 values). */
struct DeviceCsr {
  int rows = 0, cols = 0, nnz = 0;
  int *indptr = nullptr, *indices = nullptr;
  float* data = nullptr;

  DeviceCsr(const std::string& dir, const std::string& name)
  {
    std::ifstream shape(dir + "/" + name + ".shape");
    if (!(shape >> rows >> cols >> nnz)) throw std::runtime_error("cannot read " + dir + "/" + name + ".shape");
    indptr  = to_device(read_file<int>(dir + "/" + name + ".indptr", rows + 1));
    indices = to_device(read_file<int>(dir + "/" + name + ".indices", nnz));
    data    = to_device(read_file<float>(dir + "/" + name + ".data", nnz));
  }
  ~DeviceCsr()
  {
    cudaFree(indptr);
    cudaFree(indices);
    cudaFree(data);
  }
  auto view() const
  {
    auto structure = raft::make_device_compressed_structure_view<int, int, int>(indptr, indices, rows, cols, nnz);
    return raft::make_device_csr_matrix_view<const float, int, int, int>(data, structure);
  }
};

/** Median milliseconds of fn() between events on stream, after one warm-up call. */
double median_ms(cudaStream_t stream, int repeats, const std::function<void()>& fn)
{
  fn();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < repeats; ++r) {
    CHECK_CUDA(cudaEventRecord(start, stream));
    fn();
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

std::vector<std::string> split(const std::string& s, char sep)
{
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string json_escape(const std::string& s)
{
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return out;
}

DistanceType metric_of(const std::string& name)
{
  auto it = kMetrics.find(name);
  if (it == kMetrics.end()) throw std::runtime_error("unknown cuVS metric " + name);
  return it->second;
}

void pairwise(raft::device_resources& handle, const std::string& dir, int repeats, const std::string& metrics)
{
  DeviceCsr q(dir, "q"), x(dir, "x");
  std::ifstream sample_file(dir + "/sample.rows", std::ios::binary | std::ios::ate);
  auto sample = read_file<int>(dir + "/sample.rows", sample_file ? sample_file.tellg() / sizeof(int) : 0);
  cudaStream_t stream = handle.get_stream().get();
  float* out          = nullptr;
  CHECK_CUDA(cudaMalloc(&out, size_t(q.rows) * x.rows * sizeof(float)));
  auto out_view = raft::make_device_matrix_view<float, int, raft::row_major>(out, q.rows, x.rows);
  for (const auto& item : split(metrics, ',')) {
    auto parts   = split(item, ':');
    float arg    = parts.size() > 1 ? std::stof(parts[1]) : 2.0f;
    std::string line;
    try {
      DistanceType metric = metric_of(parts[0]);
      CHECK_CUDA(cudaMemset(out, 0xff, size_t(q.rows) * x.rows * sizeof(float)));  // NaN: unwritten shows
      double ms = median_ms(stream, repeats, [&] {
        cuvs::distance::pairwise_distance(handle, q.view(), x.view(), out_view, metric, arg);
      });
      CHECK_CUDA(cudaGetLastError());
      std::vector<float> rows(sample.size() * size_t(x.rows));
      for (size_t i = 0; i < sample.size(); ++i)
        CHECK_CUDA(cudaMemcpy(rows.data() + i * x.rows, out + size_t(sample[i]) * x.rows, x.rows * sizeof(float),
                              cudaMemcpyDeviceToHost));
      write_file(dir + "/out_" + parts[0] + ".f32", rows);
      char buf[256];
      std::snprintf(buf, sizeof buf, "{\"metric\": \"%s\", \"arg\": %g, \"ms\": %.4f}", parts[0].c_str(), arg, ms);
      line = buf;
    } catch (const std::exception& e) {
      cudaGetLastError();  // clear a sticky-free error so the next metric runs
      line = "{\"metric\": \"" + parts[0] + "\", \"error\": \"" + json_escape(e.what()).substr(0, 300) + "\"}";
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  cudaFree(out);
}

void knn(raft::device_resources& handle, const std::string& dir, int repeats, int k, const std::string& metrics)
{
  DeviceCsr x(dir, "x");
  cudaStream_t stream = handle.get_stream().get();
  auto neighbors      = raft::make_device_matrix<int, int64_t>(handle, x.rows, k);
  auto dists          = raft::make_device_matrix<float, int64_t>(handle, x.rows, k);
  for (const auto& name : split(metrics, ',')) {
    std::string line;
    try {
      DistanceType metric = metric_of(name);
      cuvs::neighbors::brute_force::sparse_search_params params;
      double ms = median_ms(stream, repeats, [&] {
        auto index = cuvs::neighbors::brute_force::build(handle, x.view(), metric);
        cuvs::neighbors::brute_force::search(handle, params, index, x.view(), neighbors.view(), dists.view());
      });
      CHECK_CUDA(cudaGetLastError());
      std::vector<float> d(size_t(x.rows) * k);
      std::vector<int> i(size_t(x.rows) * k);
      CHECK_CUDA(cudaMemcpy(d.data(), dists.data_handle(), d.size() * sizeof(float), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(i.data(), neighbors.data_handle(), i.size() * sizeof(int), cudaMemcpyDeviceToHost));
      write_file(dir + "/knn_" + name + ".f32", d);
      write_file(dir + "/knn_" + name + ".i32", i);
      char buf[256];
      std::snprintf(buf, sizeof buf, "{\"metric\": \"%s\", \"k\": %d, \"ms\": %.4f}", name.c_str(), k, ms);
      line = buf;
    } catch (const std::exception& e) {
      cudaGetLastError();
      line = "{\"metric\": \"" + name + "\", \"error\": \"" + json_escape(e.what()).substr(0, 300) + "\"}";
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
}

/** k nearest rows of x (the index, built once, outside the timing) to each row of q, in batches of `batch`
 * query rows: median milliseconds of one batch (the first), and the whole answer. */
void search(raft::device_resources& handle, const std::string& dir, int repeats, int k, int batch,
            const std::string& name)
{
  DeviceCsr q(dir, "q"), x(dir, "x");
  cudaStream_t stream = handle.get_stream().get();
  auto neighbors      = raft::make_device_matrix<int, int64_t>(handle, q.rows, k);
  auto dists          = raft::make_device_matrix<float, int64_t>(handle, q.rows, k);
  std::string line;
  try {
    DistanceType metric = metric_of(name);
    cuvs::neighbors::brute_force::sparse_search_params params;
    auto index = cuvs::neighbors::brute_force::build(handle, x.view(), metric);
    double ms  = 0;
    for (int b0 = 0; b0 < q.rows; b0 += batch) {
      int rows  = std::min(batch, q.rows - b0);
      // the batch's rows as their own CSR: row pointers rebased on the host
      std::vector<int> ptr(rows + 1);
      CHECK_CUDA(cudaMemcpy(ptr.data(), q.indptr + b0, (rows + 1) * sizeof(int), cudaMemcpyDeviceToHost));
      int first = ptr[0];
      for (auto& v : ptr) v -= first;
      int* dptr = to_device(ptr);
      auto structure = raft::make_device_compressed_structure_view<int, int, int>(
        dptr, q.indices + first, rows, q.cols, ptr[rows]);
      auto view = raft::make_device_csr_matrix_view<const float, int, int, int>(q.data + first, structure);
      auto nv   = raft::make_device_matrix_view<int, int64_t>(neighbors.data_handle() + int64_t(b0) * k, rows, k);
      auto dv   = raft::make_device_matrix_view<float, int64_t>(dists.data_handle() + int64_t(b0) * k, rows, k);
      auto run  = [&] { cuvs::neighbors::brute_force::search(handle, params, index, view, nv, dv); };
      if (b0 == 0)
        ms = median_ms(stream, repeats, run);
      else {
        run();
        CHECK_CUDA(cudaStreamSynchronize(stream));
      }
      cudaFree(dptr);
    }
    CHECK_CUDA(cudaGetLastError());
    std::vector<float> d(size_t(q.rows) * k);
    std::vector<int> i(size_t(q.rows) * k);
    CHECK_CUDA(cudaMemcpy(d.data(), dists.data_handle(), d.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(i.data(), neighbors.data_handle(), i.size() * sizeof(int), cudaMemcpyDeviceToHost));
    write_file(dir + "/search_" + name + ".f32", d);
    write_file(dir + "/search_" + name + ".i32", i);
    char buf[256];
    std::snprintf(buf, sizeof buf, "{\"metric\": \"%s\", \"k\": %d, \"batch\": %d, \"ms\": %.4f}", name.c_str(),
                  k, batch, ms);
    line = buf;
  } catch (const std::exception& e) {
    cudaGetLastError();
    line = "{\"metric\": \"" + name + "\", \"error\": \"" + json_escape(e.what()).substr(0, 300) + "\"}";
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv)
{
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (!((mode == "pairwise" && argc == 5) || (mode == "knn" && argc == 6) || (mode == "search" && argc == 7))) {
      std::fprintf(stderr,
                   "usage: %s pairwise DIR REPEATS METRIC[:ARG],...\n"
                   "       %s knn DIR REPEATS K METRIC,...\n"
                   "       %s search DIR REPEATS K BATCH METRIC\n",
                   argv[0], argv[0], argv[0]);
      return 2;
    }
    // Temporary buffers from the driver's stream-ordered pool, as CuPy's pool serves ours.
    rmm::mr::set_current_device_resource(rmm::mr::cuda_async_memory_resource{});
    raft::device_resources handle;
    int repeats = std::atoi(argv[3]);
    if (mode == "pairwise")
      pairwise(handle, argv[2], repeats, argv[4]);
    else if (mode == "knn")
      knn(handle, argv[2], repeats, std::atoi(argv[4]), argv[5]);
    else
      search(handle, argv[2], repeats, std::atoi(argv[4]), std::atoi(argv[5]), argv[6]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuvs_harness: %s\n", e.what());
    return 1;
  }
  return 0;
}
