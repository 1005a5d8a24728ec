// collective_attrs.h: the one set of collective attributes every entry point fills, and
// status.h's CanonicalCode, the error table the framework boundaries map through.
#include "collective_attrs.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tfring {
namespace {

TEST(CollectiveAttrsTest, MakeRequestCopiesEveryAttribute) {
  CollectiveAttrs a;
  a.op = OpType::kReducescatter;
  a.reduce_op = ReduceOp::kMax;
  a.prescale = 0.5;
  a.postscale = 3.0;
  a.root = 2;
  a.process_set_id = 7;
  a.device = 1;
  a.splits = {1, 2};
  const Request r = a.MakeRequest("grad/w", DataType::kBFloat16, {4, 3});
  EXPECT_EQ(r.name, "grad/w");
  EXPECT_EQ(r.dtype, DataType::kBFloat16);
  EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(r.op, OpType::kReducescatter);
  EXPECT_EQ(r.reduce_op, ReduceOp::kMax);
  EXPECT_EQ(r.prescale, 0.5);
  EXPECT_EQ(r.postscale, 3.0);
  EXPECT_EQ(r.root, 2);
  EXPECT_EQ(r.process_set_id, 7);
  EXPECT_EQ(r.device, 1);
  EXPECT_EQ(r.splits, (std::vector<int64_t>{1, 2}));
  // The defaults are a Request's defaults: host memory, every rank, no scaling.
  const Request d = CollectiveAttrs().MakeRequest("x", DataType::kFloat32, {});
  const Request plain;
  EXPECT_EQ(d.op, plain.op);
  EXPECT_EQ(d.reduce_op, plain.reduce_op);
  EXPECT_EQ(d.device, plain.device);
  EXPECT_EQ(d.root, plain.root);
  EXPECT_EQ(d.process_set_id, plain.process_set_id);
  EXPECT_EQ(d.prescale, plain.prescale);
  EXPECT_EQ(d.postscale, plain.postscale);
}

TEST(CollectiveAttrsTest, SetReduceOpChecksAgainstTheCoreTable) {
  CollectiveAttrs a;
  for (int op = 0; op < kNumReduceOps; ++op) {
    TFRING_EXPECT_OK(a.SetReduceOp(op));
    EXPECT_EQ(a.reduce_op, static_cast<ReduceOp>(op));
  }
  EXPECT_EQ(ReduceOpList(), "Sum(0), Average(1), Min(2), Max(3), Product(4), Adasum(5)");
  for (int bad : {-1, kNumReduceOps, 255}) {
    EXPECT_TRUE(testing_util::HasError(a.SetReduceOp(bad), ErrorCode::kInvalidArgument,
                                       {"reduce_op=" + std::to_string(bad), ReduceOpList()}));
  }
  EXPECT_EQ(a.reduce_op, static_cast<ReduceOp>(kNumReduceOps - 1));  // a refused value changes nothing
}

// ARCHITECTURE.md section 3, as canonical (gRPC / absl) codes.
TEST(CanonicalCodeTest, EveryErrorCodeHasItsFrameworkCode) {
  EXPECT_EQ(CanonicalCode(ErrorCode::kOk), 0);
  EXPECT_EQ(CanonicalCode(ErrorCode::kInvalidArgument), 3);   // INVALID_ARGUMENT
  EXPECT_EQ(CanonicalCode(ErrorCode::kMismatch), 9);          // FAILED_PRECONDITION
  EXPECT_EQ(CanonicalCode(ErrorCode::kPrecondition), 9);      // FAILED_PRECONDITION
  EXPECT_EQ(CanonicalCode(ErrorCode::kPeerLost), 14);         // UNAVAILABLE
  EXPECT_EQ(CanonicalCode(ErrorCode::kTimeout), 4);           // DEADLINE_EXCEEDED
  EXPECT_EQ(CanonicalCode(ErrorCode::kUnimplemented), 12);    // UNIMPLEMENTED
  EXPECT_EQ(CanonicalCode(ErrorCode::kInternal), 13);         // INTERNAL
  EXPECT_EQ(CanonicalCode(ErrorCode::kAborted), 10);          // ABORTED
  EXPECT_EQ(CanonicalCode(static_cast<ErrorCode>(200)), 13);  // unknown: INTERNAL
}

}  // namespace
}  // namespace tfring
