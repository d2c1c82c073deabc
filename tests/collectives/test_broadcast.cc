// broadcast and grouped_broadcast: every dtype from every root, sizes 0/1/odd/multi-dim/large.
#include <memory>
#include <string>

#include "collectives/reference.h"

using namespace htest;
using namespace htest::ref;

namespace {

double bcValue(hcoll_dtype_t t, int root, int64_t i) {
  if (t == HCOLL_BOOL) return (root + i) % 2;
  int64_t v = (root * 13 + i * 7) % 90;
  return isUnsigned(t) ? v : v - 40;
}

// A value no rank's root data has, so a rank whose buffer was not replaced is caught.
double junk(hcoll_dtype_t t) { return t == HCOLL_BOOL ? 1 : 99; }

}  // namespace

HTEST_CASE("broadcast: every dtype from every root", "[broadcast]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<std::vector<int64_t>> shapes = {{0}, {1}, {9}, {2, 3, 2}, {}};
  for (hcoll_dtype_t t : allDtypes()) {
    struct Pending {
      std::unique_ptr<Tensor> buf;
      int root;
      hcoll_request_t req;
    };
    std::vector<Pending> pending;
    for (int root = 0; root < n; ++root) {
      for (size_t s = 0; s < shapes.size(); ++s) {
        Pending p{std::make_unique<Tensor>(t, shapes[s]), root, HCOLL_REQUEST_NULL};
        for (int64_t i = 0; i < p.buf->elements(); ++i) {
          p.buf->set(i, r == root ? bcValue(t, root, i) : (t == HCOLL_BOOL ? 1 - bcValue(t, root, i) : junk(t)));
        }
        auto d = p.buf->desc();
        std::string name = std::string("bc.") + dtypeName(t) + "." + std::to_string(root) + "." +
                           std::to_string(s);
        HCOLL_REQUIRE_OK(hcoll_broadcast(world(), name.c_str(), &d, root, &p.req));
        pending.push_back(std::move(p));
      }
    }
    for (auto& p : pending) {
      HCOLL_REQUIRE_OK(waitAndFree(p.req));
      checkAll(
          t, p.buf->elements(), [&](int64_t i) { return p.buf->get(i); },
          [&](int64_t i) { return bcValue(t, p.root, i); },
          "broadcast from root " + std::to_string(p.root));
    }
  }
}

HTEST_CASE("broadcast: large buffer from the last rank", "[broadcast][large]") {
  const int r = worldRank();
  const int n = worldSize();
  const int root = n - 1;
  Tensor buf(HCOLL_FLOAT64, {1 << 20});
  for (int64_t i = 0; i < buf.elements(); ++i) buf.set(i, r == root ? i : -1);
  auto d = buf.desc();
  hcoll_request_t req;
  HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "bc.large", &d, root, &req));
  HCOLL_REQUIRE_OK(waitAndFree(req));
  int64_t wrong = 0;
  for (int64_t i = 0; i < buf.elements(); ++i) wrong += buf.get(i) != i;
  HREQUIRE(wrong == 0);
}

// The MPI backend sends (8, 32] KiB transfers as 8 KiB pieces, and on one node larger ones
// through its shared-memory lanes in 128 KiB chunks (mpi_transport_impl.h, mpi_shm.h): sizes at and
// around the ends, all in flight at once, so pieces and chunks of different operations interleave.
HTEST_CASE("broadcast: sizes around the MPI backend's message pieces and lane chunks",
           "[broadcast]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<int64_t> sizes = {8191,   8192,   8193,   20001,  32767,   32768,
                                      32769,  65536,  131071, 131072, 131073,  262145,
                                      524288, 524291, 655360, 1048579};
  std::vector<std::unique_ptr<Tensor>> bufs;
  std::vector<hcoll_request_t> reqs;
  for (size_t s = 0; s < sizes.size(); ++s) {
    const int root = static_cast<int>(s) % n;
    bufs.push_back(std::make_unique<Tensor>(HCOLL_UINT8, std::vector<int64_t>{sizes[s]}));
    for (int64_t i = 0; i < sizes[s]; ++i) bufs[s]->set(i, r == root ? (i * 7 + s) % 251 : 255);
    auto d = bufs[s]->desc();
    reqs.emplace_back();
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), ("bc.piece." + std::to_string(s)).c_str(), &d, root,
                                     &reqs.back()));
  }
  for (size_t s = 0; s < sizes.size(); ++s) {
    HCOLL_REQUIRE_OK(waitAndFree(reqs[s]));
    int64_t wrong = 0;
    for (int64_t i = 0; i < sizes[s]; ++i) {
      wrong += bufs[s]->get(i) != static_cast<double>((i * 7 + s) % 251);
    }
    HINFO("size " << sizes[s]);
    HREQUIRE(wrong == 0);
  }
}

// One operation after the other, each waited, roots taking turns and sizes that leave each
// lane's ring at a different chunk: a lane's position carries over from one operation to the
// next, so every operation must take exactly the chunks it was given.
HTEST_CASE("broadcast: back-to-back operations keep the lanes in step", "[broadcast]") {
  const int r = worldRank();
  const int n = worldSize();
  for (int step = 0; step < 24; ++step) {
    const int root = step % n;
    const int64_t bytes = 9000 + static_cast<int64_t>(step) * 40961;  // up to ~0.95 MiB
    Tensor buf(HCOLL_UINT8, {bytes});
    for (int64_t i = 0; i < bytes; ++i) buf.set(i, r == root ? (i * 13 + step) % 251 : 255);
    auto d = buf.desc();
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_broadcast(world(), "bc.steps", &d, root, &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    int64_t wrong = 0;
    for (int64_t i = 0; i < bytes; ++i) {
      wrong += buf.get(i) != static_cast<double>((i * 13 + step) % 251);
    }
    HINFO("step " << step << " root " << root << " bytes " << bytes);
    HREQUIRE(wrong == 0);
  }
}

HTEST_CASE("grouped_broadcast: mixed dtypes and shapes from every root", "[broadcast][grouped]") {
  const int r = worldRank();
  const int n = worldSize();
  const std::vector<std::pair<hcoll_dtype_t, std::vector<int64_t>>> members = {
      {HCOLL_INT8, {5}}, {HCOLL_FLOAT32, {2, 2}}, {HCOLL_BFLOAT16, {0}},
      {HCOLL_UINT16, {3}}, {HCOLL_FLOAT64, {}}, {HCOLL_BOOL, {4}}};
  for (int root = 0; root < n; ++root) {
    std::vector<std::unique_ptr<Tensor>> bufs;
    std::vector<hcoll_tensor_t> descs;
    for (auto& m : members) {
      bufs.push_back(std::make_unique<Tensor>(m.first, m.second));
      for (int64_t i = 0; i < bufs.back()->elements(); ++i) {
        double v = bcValue(m.first, root, i);
        bufs.back()->set(i, r == root ? v : (m.first == HCOLL_BOOL ? 1 - v : junk(m.first)));
      }
      descs.push_back(bufs.back()->desc());
    }
    hcoll_request_t req;
    HCOLL_REQUIRE_OK(hcoll_grouped_broadcast(world(), ("gbc." + std::to_string(root)).c_str(),
                                             static_cast<int>(descs.size()), descs.data(), root,
                                             &req));
    HCOLL_REQUIRE_OK(waitAndFree(req));
    for (size_t m = 0; m < members.size(); ++m) {
      checkAll(
          members[m].first, bufs[m]->elements(), [&](int64_t i) { return bufs[m]->get(i); },
          [&](int64_t i) { return bcValue(members[m].first, root, i); },
          "grouped broadcast member " + std::to_string(m) + " root " + std::to_string(root));
    }
  }
}
