// The loopback backend's collectives, driven directly: N threads, one channel each. Every
// collective x dtype x op, in place and out of place, sizes 0/1/odd/large, uneven allgather and
// alltoall, float16/bfloat16 accumulation in float32, the control plane, split/create.
#include <atomic>
#include <numeric>

#include "loopback_harness.h"

using namespace htest::loopback;

namespace {

std::string label(DataType t, ReduceOp op, size_t count, bool inPlace) {
  return std::string(hcoll::dataTypeName(t)) + " " + hcoll::reduceOpName(op) + " x" +
         std::to_string(count) + (inPlace ? " in place" : " out of place");
}

}  // namespace

TEST_CASE("loopback allreduce: every dtype and op, in place and out of place", "[loopback]") {
  for (int n : {1, 2, 3, 4}) {
    INFO(n << " ranks");
    Channels world = makeWorld(n);
    runRanks(world, [&](int r, Channel& ch, RankLog& log) {
      for (DataType t : allDtypes()) {
        const size_t es = hcoll::dataTypeSize(t);
        struct Case {
          ReduceOp op;
          size_t count;
          bool inPlace;
          std::vector<uint8_t> in, out;
        };
        std::vector<Case> cases;
        for (ReduceOp op : allOps()) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
            for (bool inPlace : {true, false}) {
              Case c{op, count, inPlace, std::vector<uint8_t>(count * es + 1),
                     std::vector<uint8_t>(count * es + 1)};
              for (size_t i = 0; i < count; ++i) store(t, c.in.data(), i, inputValue(t, op, r, i));
              cases.push_back(std::move(c));
            }
          }
        }
        // All of one dtype in flight at once: rounds are matched by order, not by time.
        std::vector<PendingPtr> pendings;
        for (Case& c : cases) {
          pendings.push_back(c.inPlace ? ch.allreduce(nullptr, c.in.data(), c.count, t, c.op)
                                       : ch.allreduce(c.in.data(), c.out.data(), c.count, t, c.op));
        }
        std::vector<Status> statuses;
        if (!driveAll(pendings, &statuses)) {
          log.failures.push_back(std::string(hcoll::dataTypeName(t)) + ": did not finish");
          continue;
        }
        for (size_t k = 0; k < cases.size(); ++k) {
          const Case& c = cases[k];
          const std::string what = label(t, c.op, c.count, c.inPlace);
          log.check(statuses[k].isOk(), what + ": " + statuses[k].message());
          const std::vector<uint8_t>& result = c.inPlace ? c.in : c.out;
          for (size_t i = 0; i < c.count; ++i) {
            const double got = load(t, result.data(), i);
            const double want = expectedValue(t, c.op, n, i);
            if (got != want) {
              log.failures.push_back(what + " element " + std::to_string(i) + ": " +
                                     std::to_string(got) + " != " + std::to_string(want));
              break;
            }
          }
          if (!c.inPlace) {  // the input is untouched
            for (size_t i = 0; i < c.count; ++i) {
              log.check(load(t, c.in.data(), i) == inputValue(t, c.op, r, i),
                        what + ": input changed");
            }
          }
        }
      }
    });
  }
}

TEST_CASE("loopback allreduce: float16/bfloat16 accumulate in float32, rounded once",
          "[loopback]") {
  // 2048 + 1 + 1 in float16 (and 256 + 1 + 1 in bfloat16): pairwise 16-bit rounding gives 2048
  // (256); float32 accumulation gives 2050 (258), exact in both formats. PRODUCT likewise: the
  // float32 product 1.5^3 = 3.375 rounds once.
  Channels world = makeWorld(3);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    for (DataType t : {DataType::kFloat16, DataType::kBfloat16}) {
      const double big = t == DataType::kFloat16 ? 2048 : 256;
      std::vector<uint16_t> sum(5), prod(5);
      for (size_t i = 0; i < sum.size(); ++i) {
        store(t, sum.data(), i, r == 0 ? big : 1);
        store(t, prod.data(), i, 1.5);
      }
      expectFinish(log, ch.allreduce(nullptr, sum.data(), sum.size(), t, ReduceOp::kSum), "sum");
      expectFinish(log, ch.allreduce(nullptr, prod.data(), prod.size(), t, ReduceOp::kProduct),
                   "product");
      const double want = 3.375;  // exact in both formats
      for (size_t i = 0; i < sum.size(); ++i) {
        log.check(load(t, sum.data(), i) == big + 2, std::string(hcoll::dataTypeName(t)) + " sum " +
                                                         std::to_string(load(t, sum.data(), i)));
        log.check(load(t, prod.data(), i) == want, std::string(hcoll::dataTypeName(t)) +
                                                       " product " +
                                                       std::to_string(load(t, prod.data(), i)));
      }
    }
  });
}

TEST_CASE("loopback allreduce: 1M float32 elements at 4 ranks", "[loopback]") {
  Channels world = makeWorld(4);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    std::vector<float> v(size_t{1} << 20);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i % 7) + r);
    expectFinish(log, ch.allreduce(nullptr, v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum),
                 "allreduce");
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != static_cast<float>(4 * (i % 7) + 6)) {
        log.failures.push_back("element " + std::to_string(i) + ": " + std::to_string(v[i]));
        break;
      }
    }
  });
}

TEST_CASE("loopback allgatherv: uneven blocks (0 included), in place and out of place",
          "[loopback]") {
  for (const std::vector<size_t>& blocks :
       {std::vector<size_t>{2, 0, 5}, std::vector<size_t>{0, 3, 0, 1}, std::vector<size_t>{4, 4},
        std::vector<size_t>{0, 0}, std::vector<size_t>{9}}) {
    const int n = static_cast<int>(blocks.size());
    INFO(n << " ranks");
    const size_t total = std::accumulate(blocks.begin(), blocks.end(), size_t{0});
    Channels world = makeWorld(n);
    runRanks(world, [&](int r, Channel& ch, RankLog& log) {
      const auto me = static_cast<size_t>(r);
      const size_t offset = std::accumulate(blocks.begin(), blocks.begin() + r, size_t{0});
      for (bool inPlace : {true, false}) {
        std::vector<uint8_t> send(blocks[me] + 1), recv(total + 1, 0xee);
        for (size_t j = 0; j < blocks[me]; ++j) send[j] = static_cast<uint8_t>(r * 16 + j);
        if (inPlace) std::copy(send.begin(), send.begin() + blocks[me], recv.begin() + offset);
        expectFinish(
            log, ch.allgatherv(inPlace ? nullptr : send.data(), blocks[me], recv.data(), blocks),
            inPlace ? "in place" : "out of place");
        size_t at = 0;
        for (size_t p = 0; p < blocks.size(); ++p) {
          for (size_t j = 0; j < blocks[p]; ++j, ++at) {
            log.check(recv[at] == static_cast<uint8_t>(p * 16 + j),
                      "byte " + std::to_string(j) + " of rank " + std::to_string(p));
          }
        }
        log.check(recv[total] == 0xee, "wrote past the end");
      }
    });
  }
}

TEST_CASE("loopback broadcast: every root, empty and not", "[loopback]") {
  Channels world = makeWorld(3);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    for (int root = 0; root < 3; ++root) {
      for (size_t bytes : {size_t{0}, size_t{13}}) {
        std::vector<uint8_t> buf(bytes + 1, static_cast<uint8_t>(100 + r));
        if (r == root) {
          for (size_t j = 0; j < bytes; ++j) buf[j] = static_cast<uint8_t>(root * 10 + j);
        }
        expectFinish(log, ch.broadcast(buf.data(), bytes, root), "root " + std::to_string(root));
        for (size_t j = 0; j < bytes; ++j) {
          log.check(buf[j] == static_cast<uint8_t>(root * 10 + j), "byte " + std::to_string(j));
        }
        log.check(buf[bytes] == static_cast<uint8_t>(100 + r), "wrote past the end");
      }
    }
  });
}

TEST_CASE("loopback alltoallv: uneven splits with empty sends, and the even alltoall",
          "[loopback]") {
  for (int n : {1, 2, 3, 4}) {
    INFO(n << " ranks");
    // Rank `from` sends (from + 2 * to) % 3 bytes to rank `to`: zeros included.
    auto bytes = [](size_t from, size_t to) { return (from + 2 * to) % 3; };
    Channels world = makeWorld(n);
    runRanks(world, [&](int r, Channel& ch, RankLog& log) {
      const auto me = static_cast<size_t>(r);
      const auto nn = static_cast<size_t>(n);
      std::vector<size_t> sendBytes(nn), recvBytes(nn);
      for (size_t p = 0; p < nn; ++p) {
        sendBytes[p] = bytes(me, p);
        recvBytes[p] = bytes(p, me);
      }
      std::vector<uint8_t> send,
          recv(std::accumulate(recvBytes.begin(), recvBytes.end(), size_t{0}) + 1, 0xee);
      for (size_t p = 0; p < nn; ++p) {
        for (size_t j = 0; j < sendBytes[p]; ++j)
          send.push_back(static_cast<uint8_t>(me * 64 + p * 8 + j));
      }
      send.push_back(0);
      expectFinish(log, ch.alltoallv(send.data(), sendBytes, recv.data(), recvBytes), "alltoallv");
      size_t at = 0;
      for (size_t p = 0; p < nn; ++p) {
        for (size_t j = 0; j < recvBytes[p]; ++j, ++at) {
          log.check(recv[at] == static_cast<uint8_t>(p * 64 + me * 8 + j),
                    "alltoallv byte " + std::to_string(j) + " from rank " + std::to_string(p));
        }
      }
      log.check(recv.back() == 0xee, "alltoallv wrote past the end");

      // Even: 3 bytes to every rank.
      std::vector<uint8_t> evenSend(3 * nn), evenRecv(3 * nn + 1, 0xee);
      for (size_t p = 0; p < nn; ++p) {
        for (size_t j = 0; j < 3; ++j)
          evenSend[p * 3 + j] = static_cast<uint8_t>(me * 64 + p * 8 + j);
      }
      expectFinish(log, ch.alltoall(evenSend.data(), evenRecv.data(), 3, nn), "alltoall");
      for (size_t p = 0; p < nn; ++p) {
        for (size_t j = 0; j < 3; ++j) {
          log.check(evenRecv[p * 3 + j] == static_cast<uint8_t>(p * 64 + me * 8 + j),
                    "alltoall byte from rank " + std::to_string(p));
        }
      }
      log.check(evenRecv.back() == 0xee, "alltoall wrote past the end");
    });
  }
}

TEST_CASE("loopback reduceScatter: every dtype and op, uneven counts, recv inside send",
          "[loopback]") {
  const std::vector<size_t> counts = {2, 0, 3};
  const size_t total = 5;
  Channels world = makeWorld(3);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    const auto me = static_cast<size_t>(r);
    const size_t begin = std::accumulate(counts.begin(), counts.begin() + r, size_t{0});
    for (DataType t : allDtypes()) {
      const size_t es = hcoll::dataTypeSize(t);
      for (ReduceOp op : allOps()) {
        // Apart: recv is its own buffer. Inside: recv is this rank's block of send (which the
        // peers read), so the backend must not write it before they did.
        for (bool inside : {false, true}) {
          std::vector<uint8_t> send(total * es), recv(counts[me] * es + 1);
          for (size_t i = 0; i < total; ++i) store(t, send.data(), i, inputValue(t, op, r, i));
          uint8_t* into = inside ? send.data() + begin * es : recv.data();
          const std::string what = label(t, op, counts[me], inside);
          expectFinish(log, ch.reduceScatter(send.data(), into, counts, t, op), what);
          for (size_t i = 0; i < counts[me]; ++i) {
            log.check(load(t, into, i) == expectedValue(t, op, 3, begin + i),
                      what + " element " + std::to_string(i));
          }
        }
      }
    }
    // float16 sums in float32 here too: 2048 + 1 + 1 in every block.
    std::vector<uint16_t> send(total), recv(counts[me]);
    for (size_t i = 0; i < total; ++i) store(DataType::kFloat16, send.data(), i, r == 0 ? 2048 : 1);
    expectFinish(
        log, ch.reduceScatter(send.data(), recv.data(), counts, DataType::kFloat16, ReduceOp::kSum),
        "float16");
    for (size_t i = 0; i < counts[me]; ++i) {
      log.check(load(DataType::kFloat16, recv.data(), i) == 2050, "float16 accumulation");
    }
  });
}

TEST_CASE("loopback barrier: nobody leaves before everyone arrived", "[loopback]") {
  Channels world = makeWorld(4);
  std::atomic<int> arrived{0};
  runRanks(world, [&](int, Channel& ch, RankLog& log) {
    for (int k = 1; k <= 5; ++k) {
      arrived.fetch_add(1);
      expectFinish(log, ch.barrier(), "barrier");
      log.check(arrived.load() >= 4 * k, "left the barrier early");
      // A second barrier so that nobody counts the next round before everyone checked.
      expectFinish(log, ch.barrier(), "barrier");
    }
  });
}

TEST_CASE("loopback control plane: bit AND, gather and broadcast of bytes", "[loopback]") {
  for (int n : {1, 3}) {
    Channels world = makeWorld(n);
    runRanks(world, [&](int r, Channel& ch, RankLog& log) {
      uint64_t words[2] = {~uint64_t{0} & ~(uint64_t{1} << r), uint64_t{0xff} << (8 * r)};
      expectFinish(log, ch.allreduceBitsAnd(words, 2), "bits");
      uint64_t want0 = ~uint64_t{0};
      for (int p = 0; p < n; ++p) want0 &= ~(uint64_t{1} << p);
      log.check(words[0] == want0, "bits word 0");
      log.check(words[1] == (n == 1 ? 0xff : 0), "bits word 1");

      std::vector<std::vector<uint8_t>> atRoot;
      expectFinish(
          log,
          ch.gatherBytes(std::vector<uint8_t>(static_cast<size_t>(r) + 1, static_cast<uint8_t>(r)),
                         &atRoot),
          "gather");
      if (r == 0) {
        log.check(atRoot.size() == static_cast<size_t>(n), "gather: one entry per rank");
        for (size_t p = 0; p < atRoot.size(); ++p) {
          log.check(atRoot[p] == std::vector<uint8_t>(p + 1, static_cast<uint8_t>(p)),
                    "gather: rank " + std::to_string(p) + "'s bytes");
        }
      }

      std::vector<uint8_t> buf =
          r == 0 ? std::vector<uint8_t>{1, 2, 3} : std::vector<uint8_t>(7, static_cast<uint8_t>(r));
      expectFinish(log, ch.broadcastBytes(&buf), "broadcastBytes");
      log.check(buf == std::vector<uint8_t>{1, 2, 3}, "broadcastBytes: rank 0's bytes");
    });
  }
}

TEST_CASE("loopback: control and data planes never pair with each other", "[loopback]") {
  // Rank 0 starts a data allreduce then a control AND, rank 1 the other way round, and each
  // drives its two in its own order: every call meets its own kind on the other rank.
  Channels world = makeWorld(2);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    std::vector<int32_t> data = {r + 1, 10 * (r + 1)};
    uint64_t word = r == 0 ? 0b1100 : 0b0110;
    std::vector<PendingPtr> p;
    if (r == 0) {
      p.push_back(ch.allreduce(nullptr, data.data(), 2, DataType::kInt32, ReduceOp::kSum));
      p.push_back(ch.allreduceBitsAnd(&word, 1));
    } else {
      p.push_back(ch.allreduceBitsAnd(&word, 1));
      p.push_back(ch.allreduce(nullptr, data.data(), 2, DataType::kInt32, ReduceOp::kSum));
    }
    std::vector<Status> s;
    log.check(driveAll(p, &s), "did not finish");
    log.check(s[0].isOk() && s[1].isOk(), "failed");
    log.check(data == std::vector<int32_t>{3, 30}, "data plane result");
    log.check(word == 0b0100, "control plane result");
  });
}

TEST_CASE("loopback split and create: colors, keys, non-members, new communicators work",
          "[loopback]") {
  Channels world = makeWorld(4);
  runRanks(world, [&](int r, Channel& ch, RankLog& log) {
    // Colors r % 2 except rank 3 (undefined); keys reverse the order.
    std::unique_ptr<Channel> half;
    log.check(ch.split(r == 3 ? -1 : r % 2, -r, &half).isOk(), "split failed");
    if (r == 3) {
      log.check(!half, "a non-member got a channel");
    } else if (!half) {
      log.failures.push_back("a member got no channel");
    } else {
      const int wantSize = r % 2 == 0 ? 2 : 1;  // {0, 2} and {1}
      log.check(half->size() == wantSize, "split size");
      log.check(half->rank() == (r == 0 ? 1 : 0), "split rank (by key, reversed)");
      log.check(half->localRank() == half->rank() && half->localSize() == half->size(),
                "local rank and size");
      int32_t v = r;
      expectFinish(log, half->allreduce(nullptr, &v, 1, DataType::kInt32, ReduceOp::kSum),
                   "allreduce on the split");
      log.check(v == (r % 2 == 0 ? 2 : 1), "allreduce on the split: " + std::to_string(v));
    }
    // create: new rank i is list[i]; ranks 0 and 2 are not listed.
    std::unique_ptr<Channel> pair;
    log.check(ch.create({3, 1}, &pair).isOk(), "create failed");
    if (r == 0 || r == 2) {
      log.check(!pair, "a non-member got a channel");
    } else if (!pair) {
      log.failures.push_back("a member got no channel");
    } else {
      log.check(pair->size() == 2 && pair->rank() == (r == 3 ? 0 : 1), "create rank");
      std::vector<uint8_t> buf = {static_cast<uint8_t>(r), 0};
      expectFinish(log, pair->broadcast(buf.data(), 1, 0), "broadcast on the new communicator");
      log.check(buf[0] == 3, "broadcast from new rank 0 (world rank 3)");
    }
    // The parent still works after its children, in step with the others.
    int64_t v = 1;
    expectFinish(log, ch.allreduce(nullptr, &v, 1, DataType::kInt64, ReduceOp::kSum), "parent");
    log.check(v == 4, "parent allreduce");
  });
}

TEST_CASE("loopback backend: ranks, worlds, external handles", "[loopback]") {
  std::unique_ptr<hcoll::backends::Backend> backend;
  CHECK(hcoll::backends::loopback::createLoopbackBackend(0, &backend).code() ==
        Code::kInvalidArgument);
  REQUIRE(hcoll::backends::loopback::createLoopbackBackend(2, &backend).isOk());
  CHECK(backend->worldSize() == 2);
  CHECK(backend->hostedRanks() == std::vector<int>{0, 1});
  std::unique_ptr<Channel> ch;
  CHECK(backend->world(2, &ch).code() == Code::kInvalidArgument);
  CHECK(backend->fromExternal(0, &ch).code() == Code::kUnsupported);
  // Each rank's k-th world call joins the k-th world, whatever the order of the calls.
  std::unique_ptr<Channel> a0, a1, b0, b1;
  REQUIRE(backend->world(0, &a0).isOk());
  REQUIRE(backend->world(1, &a1).isOk());
  REQUIRE(backend->world(1, &b1).isOk());
  REQUIRE(backend->world(0, &b0).isOk());
  CHECK(b0->rank() == 0);
  CHECK(b1->rank() == 1);
  CHECK(b1->size() == 2);
  int32_t x = 1, y = 2;
  std::vector<PendingPtr> both;
  both.push_back(b0->allreduce(nullptr, &x, 1, DataType::kInt32, ReduceOp::kSum));
  both.push_back(b1->allreduce(nullptr, &y, 1, DataType::kInt32, ReduceOp::kSum));
  std::vector<Status> statuses;
  // One thread is enough: nothing blocks (each finishes once both have read).
  REQUIRE(driveAll(both, &statuses, 5));
  CHECK(statuses[0].isOk());
  CHECK((x == 3 && y == 3));
}

TEST_CASE("loopback stall notes: who waits in which round", "[loopback]") {
  Channels world = makeWorld(3);
  CHECK(world[0]->signals().tracksWaiting());
  world[0]->signals().noteWaiting(5);
  world[2]->signals().noteWaiting(4);
  world[2]->signals().noteWaiting(5);
  CHECK(world[1]->signals().peersWaiting(5) == std::vector<int>{0, 2});
  CHECK(world[0]->signals().peersWaiting(5) == std::vector<int>{2});
  CHECK(world[1]->signals().peersWaiting(4).empty());
}
