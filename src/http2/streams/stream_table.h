// The session's open streams by id (http2 layer, private): a vector sorted by id, since each end
// opens its streams in ascending order, 2 ids apart: an id is looked for where that spacing puts
// it, then by binary search, with the last answer cached.
// Closing a stream frees its entry in place instead of moving every entry after it (64 calls in
// flight close about oldest first, which made each close move the other 63): free entries at
// either end are dropped at once, those in between when they outnumber the open streams, so
// that every operation is O(log n) amortized, whatever order a peer opens and closes streams
// in, and the vector holds at most about twice the open streams. One per connection, its thread
// only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ferry::http2::streams {

template <class T>
class StreamTable {
 public:
  // The stream with this id, or null.
  T* find(std::uint32_t id) {
    if (recent_ != nullptr && recent_id_ == id) return recent_;
    const auto it = locate(id);
    if (it == entries_.end() || it->first != id || it->second == nullptr) return nullptr;
    recent_ = it->second;
    recent_id_ = id;
    return recent_;
  }

  // Adds `stream` (not null) as `id`, which the table does not hold: an append when `id` is
  // above every id held (always, for the streams of one end).
  void insert(std::uint32_t id, T* stream) {
    if (entries_.size() == head_ || entries_.back().first < id) {
      entries_.emplace_back(id, stream);
    } else {
      entries_.emplace(lower_bound(id), id, stream);
    }
    ++open_;
    recent_ = stream;
    recent_id_ = id;
  }

  // Removes `stream` if the table holds it as `id`.
  void erase(std::uint32_t id, T* stream) {
    if (recent_ == stream) recent_ = nullptr;
    const auto it = locate(id);
    if (it == entries_.end() || it->first != id || it->second != stream) return;
    it->second = nullptr;
    --open_;
    while (head_ < entries_.size() && entries_[head_].second == nullptr) ++head_;
    while (entries_.size() > head_ && entries_.back().second == nullptr) entries_.pop_back();
    if (head_ == entries_.size()) {
      entries_.clear();
      head_ = 0;
    } else if (entries_.size() - head_ > 2 * open_ + kSlack || head_ > 2 * open_ + kSlack) {
      // More free entries than open streams: packed to the front (no allocation).
      std::size_t to = 0;
      for (std::size_t from = head_; from < entries_.size(); ++from) {
        if (entries_[from].second != nullptr) entries_[to++] = entries_[from];
      }
      entries_.resize(to);
      head_ = 0;
    }
  }

  std::size_t size() const { return open_; }
  bool empty() const { return open_ == 0; }

  // The open stream with the highest id (null when none).
  T* highest() const { return entries_.size() > head_ ? entries_.back().second : nullptr; }

  // Calls f(id, stream) for every open stream, ascending, until it returns false. f must not
  // insert or erase.
  template <class F>
  void for_each(F f) const {
    for (std::size_t i = head_; i < entries_.size(); ++i) {
      if (entries_[i].second != nullptr && !f(entries_[i].first, entries_[i].second)) return;
    }
  }

  void clear() {
    entries_.clear();
    head_ = 0;
    open_ = 0;
    recent_ = nullptr;
  }

  // Bytes of storage held.
  std::size_t memory() const { return entries_.capacity() * sizeof(Entry); }

 private:
  using Entry = std::pair<std::uint32_t, T*>;  // second null: a freed entry
  // Free entries kept in between before packing, beside twice the open streams.
  static constexpr std::size_t kSlack = 16;

  // Where `id` is or would be (lower_bound). An end opens its streams 2 ids apart and a freed
  // entry keeps its place, so the entry of `id` is usually (id - first id) / 2 after the first:
  // looked at first, before the binary search.
  typename std::vector<Entry>::iterator locate(std::uint32_t id) {
    if (head_ == entries_.size() || id > entries_.back().first) return entries_.end();
    const std::uint32_t first = entries_[head_].first;
    if (id >= first) {
      const std::size_t guess = head_ + (id - first) / 2;
      if (guess < entries_.size() && entries_[guess].first == id) {
        return entries_.begin() + static_cast<std::ptrdiff_t>(guess);
      }
    }
    return lower_bound(id);
  }
  typename std::vector<Entry>::iterator lower_bound(std::uint32_t id) {
    return std::lower_bound(entries_.begin() + static_cast<std::ptrdiff_t>(head_), entries_.end(),
                            id, [](const Entry& e, std::uint32_t v) { return e.first < v; });
  }

  std::vector<Entry> entries_;  // ascending ids from head_ on
  std::size_t head_ = 0;        // entries before it are free (dropped lazily)
  std::size_t open_ = 0;
  T* recent_ = nullptr;  // find()'s or insert()'s last stream, as recent_id_
  std::uint32_t recent_id_ = 0;
};

}  // namespace ferry::http2::streams
