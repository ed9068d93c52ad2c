// An owning handle to an intrusively reference-counted object (common, below every layer): the
// calls and streams count their holders themselves (ref() / unref()), and this handle is how a
// holder keeps one of those references, so that it is let go on every path out of a scope,
// including a coroutine frame destroyed while it waited.
#pragma once

#include <utility>

namespace ferry::detail {

// T has ref() and unref() (unref() may delete it, or post its deletion to its thread); release()
// and reset_inline() below need more. Not thread-safe itself: one owner at a time, as for
// std::unique_ptr.
template <class T>
class Ref {
 public:
  Ref() = default;
  // Takes a new reference to p (null: none).
  explicit Ref(T* p) : p_(p) {
    if (p_ != nullptr) p_->ref();
  }
  // Takes over a reference the caller holds already (a creator's initial one, say).
  static Ref adopt(T* p) {
    Ref r;
    r.p_ = p;
    return r;
  }

  Ref(const Ref& other) : Ref(other.p_) {}
  Ref(Ref&& other) noexcept : p_(std::exchange(other.p_, nullptr)) {}
  Ref& operator=(Ref other) noexcept {
    std::swap(p_, other.p_);
    return *this;
  }
  ~Ref() { reset(); }

  // Lets go of the reference (unref(): the last one deletes, or posts the deletion).
  void reset() {
    if (T* p = std::exchange(p_, nullptr)) p->unref();
  }
  // The same with unref_inline(): the last reference deletes at once. For a holder with nothing
  // of the object's below it on the stack, on the object's thread.
  void reset_inline() {
    if (T* p = std::exchange(p_, nullptr)) p->unref_inline();
  }
  // Hands the reference to a holder that counts it by hand (the HTTP/2 connection, which lets
  // go of a stream when it closes).
  [[nodiscard]] T* release() { return std::exchange(p_, nullptr); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
};

}  // namespace ferry::detail
