// llama::custom_sdpa's arithmetic (kernels/attention.cpp) against the scalar
// loop it replaced, at stories110m's attention shape (12 heads of 64) over
// long contexts: decode steps and 128-token prefills, causal.
//
//   cmake --build build-native --target etna_attention_bench
//   build-native/etna_attention_bench [rounds]   (default 20 for decode, 5 for prefill)
//
// Prints the best wall milliseconds of one call (one layer) for the old loop
// on one thread, and for the kernel on every path the CPU has at 1 and 2
// threads (a pool of 2, as a module with numThreads 2 has).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace {

using etna::kernels::AttentionPath;
using etna::kernels::AttentionProblem;

// The kernel before tiling: every row, key and dim in turn.
void scalar_loop(const AttentionProblem& a) {
  const int64_t group = a.heads / a.kv_heads;
  std::vector<float> scores(static_cast<size_t>(a.visible)), acc(static_cast<size_t>(a.head_dim));
  for (int64_t h = 0; h < a.heads; ++h) {
    const int64_t kv_head = h / group;
    for (int64_t r = 0; r < a.sequence; ++r) {
      const int64_t seen = a.causal ? a.start_pos + r + 1 : a.visible;
      const float* q = a.query + (r * a.heads + h) * a.head_dim;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < seen; ++c) {
        const float* k = a.keys + (c * a.kv_heads + kv_head) * a.head_dim;
        float dot = 0;
        for (int64_t d = 0; d < a.head_dim; ++d) dot += q[d] * k[d];
        scores[static_cast<size_t>(c)] = dot * a.scale;
        top = std::max(top, scores[static_cast<size_t>(c)]);
      }
      float sum = 0;
      for (int64_t c = 0; c < seen; ++c)
        sum += (scores[static_cast<size_t>(c)] = std::exp(scores[static_cast<size_t>(c)] - top));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t c = 0; c < seen; ++c) {
        const float* v = a.values + (c * a.kv_heads + kv_head) * a.head_dim;
        for (int64_t d = 0; d < a.head_dim; ++d) acc[static_cast<size_t>(d)] += scores[static_cast<size_t>(c)] * v[d];
      }
      float* o = a.out + (r * a.heads + h) * a.head_dim;
      for (int64_t d = 0; d < a.head_dim; ++d) o[d] = acc[static_cast<size_t>(d)] / sum;
    }
  }
}

template <typename Fn>
double best_ms(int rounds, const Fn& fn) {
  double best = 1e300;
  for (int i = 0; i < rounds; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 0;
  const auto pool = etna::ThreadPool::create(2);
  struct Shape {
    int64_t sequence, start_pos, capacity;
    const char* name;
  };
  const Shape shapes[] = {{1, 1023, 1024, "decode at position 1023"},
                          {1, 2047, 2048, "decode at position 2047"},
                          {128, 0, 2048, "prefill 128 from 0"},
                          {128, 1920, 2048, "prefill 128 at 1920"}};
  const int64_t heads = 12, head_dim = 64;
  for (const Shape& s : shapes) {
    std::vector<float> q(static_cast<size_t>(s.sequence * heads * head_dim));
    std::vector<float> k(static_cast<size_t>(s.capacity * heads * head_dim)), v(k.size()), out(q.size());
    uint32_t state = 1;
    for (auto* t : {&q, &k, &v}) {
      for (float& x : *t) x = static_cast<float>((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    }
    AttentionProblem p;
    p.query = q.data();
    p.keys = k.data();
    p.values = v.data();
    p.out = out.data();
    p.batch = 1;
    p.sequence = s.sequence;
    p.heads = p.kv_heads = heads;
    p.head_dim = head_dim;
    p.capacity = s.capacity;
    p.start_pos = s.start_pos;
    p.visible = s.start_pos + s.sequence;
    p.causal = true;
    p.scale = 0.125f;
    const int n = rounds ? rounds : (s.sequence > 1 ? 5 : 20);
    std::printf("%-24s scalar loop %8.3f ms", s.name, best_ms(n, [&] { scalar_loop(p); }));
    for (AttentionPath path : etna::kernels::available_attention_paths()) {
      etna::kernels::force_attention_path(path);
      const double one = best_ms(n, [&] { (void)etna::kernels::attend(p, nullptr); });
      const double two = best_ms(n, [&] { (void)etna::kernels::attend(p, pool ? pool->get() : nullptr); });
      std::printf(" | %s %8.3f / %8.3f ms", etna::kernels::attention_path_name(path), one, two);
    }
    etna::kernels::clear_forced_attention_path();
    std::printf("   (1 / 2 threads)\n");
  }
  return 0;
}
