// collective_layout.h: the byte layout both backends use for allgather and alltoall.
#include "backends/collective_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace tfring {
namespace {

using Sizes = std::vector<size_t>;
using Rows = std::vector<int64_t>;

Request Float32Rows(Rows shape) {
  Request q;
  q.attrs.dtype = DataType::kFloat32;
  q.shape = std::move(shape);
  return q;
}

TEST(CollectiveLayoutTest, AllgatherOfUnevenRows) {
  Response r;
  r.attrs.op = OpType::kAllgather;
  r.sizes = {2, 0, 3};  // rows of ranks 0, 1, 2
  const GatherLayout l = AllgatherLayout(r, Float32Rows({2, 4}), 3);  // rows of 16 bytes
  EXPECT_EQ(l.recv.bytes, (Sizes{32, 0, 48}));
  EXPECT_EQ(l.recv.offsets, (Sizes{0, 32, 32}));
  EXPECT_EQ(l.recv.total, 80u);
  EXPECT_FALSE(l.recv.Equal());
  EXPECT_EQ(l.output_shape, (Rows{5, 4}));
  EXPECT_TRUE(l.send.bytes.empty());
  EXPECT_TRUE(l.received_rows.empty());
}

TEST(CollectiveLayoutTest, AllgatherOfEqualRowsAndEmptyTensors) {
  Response r;
  r.sizes = {3, 3};
  const GatherLayout l = AllgatherLayout(r, Float32Rows({3}), 2);
  EXPECT_TRUE(l.recv.Equal());
  EXPECT_EQ(l.recv.offsets, (Sizes{0, 12}));
  EXPECT_EQ(l.output_shape, (Rows{6}));
  r.sizes = {0, 0};
  const GatherLayout empty = AllgatherLayout(r, Float32Rows({0, 7}), 2);
  EXPECT_EQ(empty.recv.total, 0u);
  EXPECT_EQ(empty.output_shape, (Rows{0, 7}));
}

TEST(CollectiveLayoutTest, AlltoallFromTheMiddleRank) {
  Response r;
  r.attrs.op = OpType::kAlltoall;
  // sizes[i * 3 + j]: rows rank i sends to rank j.
  r.sizes = {1, 2, 3,
             4, 0, 6,
             7, 8, 9};
  const GatherLayout l = AlltoallLayout(r, Float32Rows({10, 2}), 3, 1);  // rows of 8 bytes
  EXPECT_EQ(l.send.bytes, (Sizes{32, 0, 48}));
  EXPECT_EQ(l.send.offsets, (Sizes{0, 32, 32}));
  EXPECT_EQ(l.received_rows, (Rows{2, 0, 8}));
  EXPECT_EQ(l.recv.bytes, (Sizes{16, 0, 64}));
  EXPECT_EQ(l.recv.offsets, (Sizes{0, 16, 16}));
  EXPECT_EQ(l.recv.total, 80u);
  EXPECT_EQ(l.output_shape, (Rows{10, 2}));
}

TEST(CollectiveLayoutTest, AllocateOutputAllocatesThenReportsTheReceivedRows) {
  Response r;
  r.sizes = {0, 1, 2, 3};  // 2 ranks; rank 0 receives 0 from itself, 2 from rank 1
  const GatherLayout l = AlltoallLayout(r, Float32Rows({1}), 2, 0);
  std::vector<std::string> calls;
  float storage[2];
  Submission s;
  s.allocate_output = [&](const Rows& shape, void** data) {
    calls.push_back("allocate " + std::to_string(shape[0]));
    *data = storage;
    return Status::OK();
  };
  s.on_received_splits = [&](const Rows& rows) {
    calls.push_back("splits " + std::to_string(rows[0]) + "," + std::to_string(rows[1]));
  };
  void* out = nullptr;
  TFRING_ASSERT_OK(l.AllocateOutput(s, &out));
  EXPECT_EQ(out, storage);
  EXPECT_EQ(calls, (std::vector<std::string>{"allocate 2", "splits 0,2"}));
  // A failed allocation is returned and reports nothing.
  calls.clear();
  s.allocate_output = [](const Rows&, void**) { return Status::Internal("out of memory"); };
  EXPECT_TRUE(testing_util::HasError(l.AllocateOutput(s, &out), ErrorCode::kInternal, {"out of memory"}));
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace tfring
