// collective_attrs.h: the one set of collective attributes every entry point fills, and
// status.h's CanonicalCode, the error table the framework boundaries map through.
#include "control/collective_attrs.h"

#include <gtest/gtest.h>

#include "control/messages.h"
#include "test_util.h"

namespace tfring {
namespace {

TEST(CollectiveAttrsTest, MakeRequestCopiesEveryAttribute) {
  CollectiveAttrs a;
  a.op = OpType::kReducescatter;
  a.dtype = DataType::kInt8;  // replaced by the tensor's
  a.reduce_op = ReduceOp::kMax;
  a.prescale = 0.5;
  a.postscale = 3.0;
  a.root = 2;
  a.process_set_id = 7;
  a.device = 1;
  const Request r = a.MakeRequest("grad/w", DataType::kBFloat16, {4, 3});
  EXPECT_EQ(r.name, "grad/w");
  EXPECT_EQ(r.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(r.splits.empty());
  EXPECT_EQ(r.attrs.dtype, DataType::kBFloat16);
  EXPECT_EQ(r.attrs.op, OpType::kReducescatter);
  EXPECT_EQ(r.attrs.reduce_op, ReduceOp::kMax);
  EXPECT_EQ(r.attrs.prescale, 0.5);
  EXPECT_EQ(r.attrs.postscale, 3.0);
  EXPECT_EQ(r.attrs.root, 2);
  EXPECT_EQ(r.attrs.process_set_id, 7);
  EXPECT_EQ(r.attrs.device, 1);
  // The defaults are a Request's defaults: host memory, every rank, no scaling.
  const Request d = CollectiveAttrs().MakeRequest("x", DataType::kFloat32, {});
  EXPECT_TRUE(d.attrs == Request().attrs);
}

// Equality covers every field: the response cache (SameRequest) relies on it.
TEST(CollectiveAttrsTest, EqualityComparesEveryField) {
  const CollectiveAttrs base;
  const std::vector<void (*)(CollectiveAttrs&)> changes = {
      [](CollectiveAttrs& a) { a.op = OpType::kBroadcast; },
      [](CollectiveAttrs& a) { a.dtype = DataType::kInt64; },
      [](CollectiveAttrs& a) { a.reduce_op = ReduceOp::kMin; },
      [](CollectiveAttrs& a) { a.prescale = 2.0; },
      [](CollectiveAttrs& a) { a.postscale = 0.5; },
      [](CollectiveAttrs& a) { a.root = 1; },
      [](CollectiveAttrs& a) { a.device = 0; },
      [](CollectiveAttrs& a) { a.process_set_id = 3; },
  };
  EXPECT_TRUE(base == CollectiveAttrs());
  for (size_t i = 0; i < changes.size(); ++i) {
    CollectiveAttrs other;
    changes[i](other);
    EXPECT_FALSE(base == other) << i;
    EXPECT_TRUE(base != other) << i;
  }
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

// The canonical (gRPC / absl) code each error becomes in TF (base/status.h; docs/architecture.md).
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
