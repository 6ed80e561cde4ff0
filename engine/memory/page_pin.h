// A pin on a TieredPool page as a handle: while it lives, the page stays in L1 (demotion skips
// it); destroying or resetting it unpins. An empty handle holds nothing. The pool outlives its pins.
#pragma once

#include <utility>

#include "memory/tiered_pool.h"

namespace kv {

class PagePin {
 public:
  PagePin() = default;
  PagePin(TieredPool& pool, PageId id) : pool_(&pool), id_(id) { pool.pin(id); }
  ~PagePin() { reset(); }
  PagePin(PagePin&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)), id_(other.id_) {}
  PagePin& operator=(PagePin&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = std::exchange(other.pool_, nullptr);
      id_ = other.id_;
    }
    return *this;
  }
  PagePin(const PagePin&) = delete;
  PagePin& operator=(const PagePin&) = delete;

  explicit operator bool() const { return pool_ != nullptr; }
  void reset() {
    if (pool_ != nullptr) std::exchange(pool_, nullptr)->unpin(id_);
  }

 private:
  TieredPool* pool_ = nullptr;
  PageId id_ = 0;
};

}  // namespace kv
