// zab/core/ring.hpp — a FIFO queue on one buffer that only grows.
//
// The queues on the write path (a leader's outstanding proposals, a learner's unapplied ones)
// take one element per write at the back and give it up at the front. std::deque allocates
// and frees a block every few elements; this ring keeps one power-of-two buffer, doubles it
// when full and keeps it when the queue drains, so in steady state a write costs no
// allocation here.
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

#include "zab/core/assert.hpp"

namespace zab {

/// A FIFO queue: push_back, pop_front (and pop_back), front/back, indexing from the front,
/// iteration front to back. `T` must be default-constructible and move-assignable; a slot that leaves the
/// queue is reset to `T{}` (it releases what it held, e.g. a frame's bytes).
template <typename T>
class ring {
    template <typename Ring, typename Value>
    class basic_iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = Value*;
        using reference = Value&;

        basic_iterator() = default;
        basic_iterator(Ring* r, std::size_t i) : ring_{r}, index_{i} {}
        reference operator*() const { return (*ring_)[index_]; }
        pointer operator->() const { return &(*ring_)[index_]; }
        basic_iterator& operator++() {
            ++index_;
            return *this;
        }
        basic_iterator operator++(int) {
            basic_iterator before = *this;
            ++index_;
            return before;
        }
        friend bool operator==(const basic_iterator& a, const basic_iterator& b) {
            return a.index_ == b.index_;
        }

    private:
        Ring* ring_ = nullptr;
        std::size_t index_ = 0;
    };

public:
    using value_type = T;
    using iterator = basic_iterator<ring, T>;
    using const_iterator = basic_iterator<const ring, const T>;

    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }

    T& operator[](std::size_t i) {
        ZAB_ASSERT(i < size_, "ring: index past the end");
        return slots_[(head_ + i) & (slots_.size() - 1)];
    }
    const T& operator[](std::size_t i) const {
        ZAB_ASSERT(i < size_, "ring: index past the end");
        return slots_[(head_ + i) & (slots_.size() - 1)];
    }
    T& front() { return (*this)[0]; }
    const T& front() const { return (*this)[0]; }
    T& back() { return (*this)[size_ - 1]; }
    const T& back() const { return (*this)[size_ - 1]; }

    void push_back(T value) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(value);
        ++size_;
    }

    void pop_front() {
        ZAB_ASSERT(size_ > 0, "ring: pop_front of an empty queue");
        slots_[head_] = T{};
        head_ = (head_ + 1) & (slots_.size() - 1);
        --size_;
    }

    void pop_back() {
        ZAB_ASSERT(size_ > 0, "ring: pop_back of an empty queue");
        back() = T{};
        --size_;
    }

    void clear() {
        while (size_ > 0) pop_front();
        head_ = 0;
    }

    template <typename It>
    void assign(It first, It last) {
        clear();
        for (; first != last; ++first) push_back(*first);
    }

    iterator begin() { return {this, 0}; }
    iterator end() { return {this, size_}; }
    const_iterator begin() const { return {this, 0}; }
    const_iterator end() const { return {this, size_}; }

private:
    void grow() {
        std::vector<T> bigger(slots_.empty() ? 16 : 2 * slots_.size());
        for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move((*this)[i]);
        slots_ = std::move(bigger);
        head_ = 0;
    }

    std::vector<T> slots_;  ///< empty, or a power of two long
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

}  // namespace zab
