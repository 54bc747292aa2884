#include "server/llamacpp/llamacpp_slots.h"

#include <algorithm>
#include <utility>

namespace tokenmill::server {

SlotBoard::Lease::Lease(Lease&& other) noexcept
    : board_(std::exchange(other.board_, nullptr)), id_(std::exchange(other.id_, -1)) {}

SlotBoard::Lease& SlotBoard::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    board_ = std::exchange(other.board_, nullptr);
    id_ = std::exchange(other.id_, -1);
  }
  return *this;
}

SlotBoard::Lease::~Lease() { release(); }

void SlotBoard::Lease::release() {
  if (!board_ || id_ < 0) return;
  std::lock_guard<std::mutex> lock(board_->mutex_);
  SlotState& s = board_->slots_[static_cast<size_t>(id_)];
  const int id = s.id;
  s = SlotState{};
  s.id = id;
  board_ = nullptr;
  id_ = -1;
}

void SlotBoard::Lease::on_token(bool has_new_line) {
  if (!board_ || id_ < 0) return;
  std::lock_guard<std::mutex> lock(board_->mutex_);
  SlotState& s = board_->slots_[static_cast<size_t>(id_)];
  ++s.n_decoded;
  if (s.n_remain > 0) --s.n_remain;
  s.has_new_line = s.has_new_line || has_new_line;
}

void SlotBoard::set_total(int total) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.resize(static_cast<size_t>(std::max(total, 0)));
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].id = static_cast<int>(i);
}

int SlotBoard::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(slots_.size());
}

SlotBoard::Lease SlotBoard::acquire(int wanted, nlohmann::json params, int64_t n_remain, std::string tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  int id = -1;
  if (wanted >= 0 && wanted < static_cast<int>(slots_.size()) && !slots_[static_cast<size_t>(wanted)].busy) {
    id = wanted;
  } else {
    for (const SlotState& s : slots_) {
      if (s.busy) continue;
      id = s.id;
      break;
    }
  }
  if (id < 0) return Lease();
  SlotState& s = slots_[static_cast<size_t>(id)];
  s.busy = true;
  s.id_task = next_task_++;
  s.params = std::move(params);
  s.n_remain = n_remain;
  s.tenant = std::move(tenant);
  return Lease(this, id);
}

std::vector<SlotState> SlotBoard::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_;
}

std::vector<SlotState> SlotBoard::snapshot_for(const std::string& tenant, bool sees_all) const {
  std::vector<SlotState> out = snapshot();
  if (sees_all) return out;
  for (SlotState& s : out) {
    if (!s.busy || s.tenant == tenant) continue;
    SlotState hidden;
    hidden.id = s.id;
    hidden.busy = true;
    s = std::move(hidden);
  }
  return out;
}

int SlotBoard::num_busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const SlotState& s) { return s.busy; }));
}

}  // namespace tokenmill::server
