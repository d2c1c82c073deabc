#pragma once
// Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation", MLSys 2021), the
// reduction Horovod offers as hvd.Adasum: the pairwise adaptive sum
//
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// applied over a tree of the ranks. Here: the arithmetic over a span of one dtype, the tree every
// backend follows, and the whole tree computed in one place (reduceAll: the loopback backend, and
// the reference the MPI backend's distributed schedule must match bit for bit).
//
// The tree over N ranks, P the largest power of two <= N, L = log2(P):
//  1. Fold: rank P + i (i < N - P) hands its vector to rank i, which replaces its own by
//     adasum(own, theirs) (own is the left operand).
//  2. Vector halving, distance doubling among ranks [0, P): at level k = 0 .. L-1 rank r pairs
//     with r ^ 2^k; of the range both hold (the whole vector at level 0), the one whose bit k is
//     clear keeps the first floor(n/2) elements, the other the rest, and each receives its
//     partner's values of the half it keeps. The pair's left operand is the vector of the ranks
//     with bit k clear. The dot product and both squared norms are needed over the FULL vectors,
//     so each rank computes them over its piece and the 2^(k+1) ranks that share the bits above k
//     (who together hold the whole vector) sum them: a recursive-doubling exchange of three
//     doubles per tensor, each step adding the lower rank's partial first, so every member gets
//     bitwise the same sums. The result is adasum(left subtree, right subtree) on every level.
//  3. The kept pieces are gathered back in reverse order (distance halving), and rank i sends the
//     whole result to rank P + i.
// Every rank ends with bitwise the same vector. A fused buffer holds several tensors: dot
// products and norms are kept per tensor (a tensor's boundaries are never crossed), so a grouped
// call equals one Adasum per tensor.
//
// Numerics, as Horovod's adasum.h: dot products and norms accumulate in double; a squared norm
// below sqrt(DBL_MIN) (a zero vector) gives its coefficient 1, so adasum(a, 0) = a and
// adasum(0, 0) = 0 (a joined rank's zeros are the identity). float32/float64 combine in double;
// float16/bfloat16 are widened to float32 and combine in float32 (coefficients rounded to
// float32), then round once to 16 bits.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"

namespace hcoll::adasum {

// Whether Adasum is defined on `dtype` (float16, bfloat16, float32, float64).
bool supports(DataType dtype);

// Per-tensor sums over a piece of the left and right vectors.
struct Dots {
  double dot = 0;      // left . right
  double leftSq = 0;   // |left|^2
  double rightSq = 0;  // |right|^2
};
// lower + higher, field by field (the order the tree fixes).
inline Dots add(const Dots& lower, const Dots& higher) {
  return Dots{lower.dot + higher.dot, lower.leftSq + higher.leftSq, lower.rightSq + higher.rightSq};
}

struct Coefficients {
  double left = 1;
  double right = 1;
};
Coefficients coefficients(const Dots& sums);

// The sums over n elements, accumulated in order from element 0.
Dots dots(DataType dtype, const void* left, const void* right, size_t n);
// dst[i] = c.left * left[i] + c.right * right[i] (left's product first); dst may be left or right.
void combine(DataType dtype, void* dst, const void* left, const void* right, size_t n,
             const Coefficients& c);

// A contiguous range of elements of the fused vector.
struct Range {
  size_t begin = 0;
  size_t count = 0;
  size_t end() const { return begin + count; }
};

// The shape of the tree over `size` ranks (see above).
struct Tree {
  explicit Tree(int size);
  int size;
  int power;   // P: the largest power of two <= size
  int levels;  // log2(P)
  // For rank r >= P, the rank it folds into; for r < size - P, the rank folding into it; else -1.
  int foldPartner(int rank) const;
};

// The range rank r (< P) holds after `levelsDone` levels of halving a vector of `count` elements.
Range keptRange(size_t count, int rank, int levelsDone);

// Where each tensor starts in the fused vector: prefix sums of the counts (tensors + 1 entries).
std::vector<size_t> tensorOffsets(const std::vector<size_t>& tensorCounts);

// Per tensor t (offsets as above): the sums over the part of t inside `range`; left and right
// point at element range.begin of each vector. out has one entry per tensor (zero outside).
void rangeDots(DataType dtype, const void* left, const void* right, const Range& range,
               const std::vector<size_t>& offsets, Dots* out);
// Per tensor t: combine over the part of t inside `range` with the coefficients of sums[t];
// dst, left and right point at element range.begin.
void rangeCombine(DataType dtype, void* dst, const void* left, const void* right,
                  const Range& range, const std::vector<size_t>& offsets, const Dots* sums);

// The whole tree in one place: inputs[r] is rank r's vector (`count` elements of `dtype`, the
// concatenation of tensors of tensorCounts[i] elements); the result goes to `out` (which may be
// one of the inputs). Bitwise what every rank of a distributed run of the same tree gets.
void reduceAll(DataType dtype, const std::vector<const void*>& inputs, size_t count,
               const std::vector<size_t>& tensorCounts, void* out);

}  // namespace hcoll::adasum
