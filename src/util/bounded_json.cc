#include "util/bounded_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tokenmill::util {

bool SharedByteBudget::try_acquire(size_t n) {
  size_t used = in_use_.load(std::memory_order_relaxed);
  do {
    if (n > capacity_ || used > capacity_ - n) return false;
  } while (!in_use_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
  return true;
}

void SharedByteBudget::release(size_t n) { in_use_.fetch_sub(n, std::memory_order_relaxed); }

namespace {

// What one node costs on a 64-bit build, rounded up for allocator headers
// and vector growth: a value's slot in its parent (16 bytes, up to twice
// that while its vector doubles); an object member (key string, value,
// list or tree node); a container's own heap block (a value holds a
// pointer to it); a string value's heap std::string; a string's bytes past
// the small-string buffer. Checked against the allocator's own count in
// bounded_json_test (EstimateCoversTheHeapTheTreeTakes).
constexpr size_t kValueBytes = 32;
constexpr size_t kMemberBytes = 96;
constexpr size_t kContainerBytes = 48;
constexpr size_t kStringObjectBytes = 48;
constexpr size_t kSmallString = 15;
constexpr size_t kSharedStep = size_t{1} << 20;

size_t string_bytes(size_t n) { return n > kSmallString ? n + 48 : 0; }

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

template <typename Json>
class BoundedBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;
  using object_t = typename Json::object_t;
  using array_t = typename Json::array_t;

  BoundedBuilder(const JsonLimits& limits, size_t text_bytes) : limits_(limits), text_bytes_(text_bytes) {
    // The document's own bytes, held while it is parsed, count against the
    // shared budget as well as its tree: drawn at once, so a body that
    // cannot fit in what is left is refused before any work.
    if (limits_.shared) draw_shared(text_bytes_ + kSharedStep);
  }
  ~BoundedBuilder() {
    if (limits_.shared && drawn_) limits_.shared->release(drawn_);
  }
  BoundedBuilder(const BoundedBuilder&) = delete;
  BoundedBuilder& operator=(const BoundedBuilder&) = delete;

  Json take() { return std::move(root_); }

  bool null() { return put(Json(nullptr), 0); }
  bool boolean(bool v) { return put(Json(v), 0); }
  bool number_integer(number_integer_t v) { return put(Json(v), 0); }
  bool number_unsigned(number_unsigned_t v) { return put(Json(v), 0); }
  bool number_float(number_float_t v, const string_t&) { return put(Json(v), 0); }
  bool string(string_t& v) {
    // The lexer's buffer becomes the value: its capacity (up to twice the
    // length, grown by doubling) is what it holds.
    const size_t extra = kStringObjectBytes + string_bytes(v.capacity());
    return put(Json(std::move(v)), extra);
  }
  bool binary(binary_t& v) {
    const size_t extra = v.size();
    return put(Json(std::move(v)), extra);
  }

  bool start_object(std::size_t) { return open(Json(nlohmann::json::value_t::object)); }
  bool start_array(std::size_t) { return open(Json(nlohmann::json::value_t::array)); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    if (f.num_keys++ >= limits_.max_object_keys)
      return refuse(JsonRefusal::kTooManyKeys,
                    fmt::format("an object has more than {} keys (the limit for one object)", limits_.max_object_keys));
    if (!charge(kMemberBytes + string_bytes(k.size()))) return false;
    object_t& obj = *f.node->template get_ptr<object_t*>();
    if constexpr (kOrdered) {
      // ordered_map is a vector of pairs: append without its linear search,
      // finding a duplicate through the frame's index instead. (libstdc++'s
      // string hash is unseeded, so colliding keys can be crafted; the key
      // limit bounds what that costs.)
      const auto [it, inserted] = f.index.try_emplace(k, obj.size());
      if (inserted) {
        obj.emplace_back(std::move(k), Json());
        pending_ = &obj.back().second;
      } else {
        pending_ = &(obj.begin() + static_cast<std::ptrdiff_t>(it->second))->second;
      }
    } else {
      pending_ = &obj[std::move(k)];  // a tree: O(log n), and finds a duplicate itself
    }
    *pending_ = Json();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line
    // 1, column 7: ..."; drop the bracketed id.
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    return refuse(JsonRefusal::kSyntax, what);
  }

  bool refused() const { return why_.has_value(); }
  JsonLimitError error() const { return JsonLimitError(*why_, message_); }

 private:
  // ordered_json's object is a vector of pairs (nlohmann::ordered_map).
  static constexpr bool kOrdered =
      std::is_base_of_v<std::vector<typename object_t::value_type, typename object_t::allocator_type>, object_t>;

  struct Frame {
    Json* node;
    size_t num_keys = 0;  // key events, duplicates included
    // Key -> position among the members (ordered objects only).
    std::unordered_map<string_t, size_t> index;
  };

  bool refuse(JsonRefusal why, std::string message) {
    if (!why_) {
      why_ = why;
      message_ = std::move(message);
    }
    return false;
  }

  bool draw_shared(size_t n) {
    if (!limits_.shared->try_acquire(n))
      return refuse(JsonRefusal::kBusy,
                    fmt::format("the server is parsing other requests that hold {} of its {} for request bodies; "
                                "retry shortly",
                                mib(limits_.shared->in_use()), mib(limits_.shared->capacity())));
    drawn_ += n;
    return true;
  }

  bool charge(size_t n) {
    charged_ += n;
    if (charged_ > limits_.max_bytes)
      return refuse(JsonRefusal::kTooLarge,
                    fmt::format("the document would take more than {} to hold once parsed (the limit for one "
                                "request); send fewer or larger values",
                                mib(limits_.max_bytes)));
    if (limits_.shared && text_bytes_ + charged_ > drawn_)
      return draw_shared(std::max(text_bytes_ + charged_ - drawn_, kSharedStep));
    return true;
  }

  // Places a scalar where the parser is: the root, an array's next slot,
  // or the value of the key just read.
  bool put(Json&& v, size_t extra) {
    if (!charge(kValueBytes + extra)) return false;
    slot() = std::move(v);
    return true;
  }

  bool open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth)
      return refuse(JsonRefusal::kTooDeep, fmt::format("the document nests deeper than {} levels", limits_.max_depth));
    if (!charge(kValueBytes + kContainerBytes)) return false;
    Json& at = slot();
    at = std::move(container);
    stack_.push_back(Frame{&at, 0, {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  // The place the next value goes. Arrays append; pointers to open
  // containers stay valid, since only the innermost one grows.
  Json& slot() {
    if (stack_.empty()) return root_;
    Json& parent = *stack_.back().node;
    if (parent.is_array()) {
      array_t& arr = *parent.template get_ptr<array_t*>();
      arr.emplace_back();
      return arr.back();
    }
    Json* target = pending_;
    pending_ = nullptr;
    return *target;
  }

  const JsonLimits& limits_;
  const size_t text_bytes_;
  Json root_;
  std::vector<Frame> stack_;
  Json* pending_ = nullptr;
  size_t charged_ = 0;
  size_t drawn_ = 0;
  std::optional<JsonRefusal> why_;
  std::string message_;
};

template <typename Json>
size_t estimate(const Json& v) {
  if (v.is_string())
    return kValueBytes + kStringObjectBytes + string_bytes(v.template get_ref<const std::string&>().capacity());
  if (v.is_array()) {
    size_t n = kValueBytes + kContainerBytes;
    for (const Json& e : v) n += estimate(e);
    return n;
  }
  if (v.is_object()) {
    size_t n = kValueBytes + kContainerBytes;
    for (auto it = v.begin(); it != v.end(); ++it)
      n += kMemberBytes + string_bytes(it.key().size()) + estimate(it.value());
    return n;
  }
  return kValueBytes;
}

}  // namespace

template <typename Json>
Json parse_bounded(std::string_view text, const JsonLimits& limits) {
  std::optional<JsonLimitError> refusal;
  {
    BoundedBuilder<Json> builder(limits, text.size());
    if (!builder.refused()) {
      const bool ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json, true);
      if (ok && !builder.refused()) return builder.take();
    }
    refusal = builder.refused() ? builder.error() : JsonLimitError(JsonRefusal::kSyntax, "not valid JSON");
  }  // the partial tree is freed here, before the refusal travels
  throw *refusal;
}

template <typename Json>
size_t estimated_json_bytes(const Json& value) {
  return estimate(value);
}

template nlohmann::json parse_bounded<nlohmann::json>(std::string_view, const JsonLimits&);
template nlohmann::ordered_json parse_bounded<nlohmann::ordered_json>(std::string_view, const JsonLimits&);
template size_t estimated_json_bytes<nlohmann::json>(const nlohmann::json&);
template size_t estimated_json_bytes<nlohmann::ordered_json>(const nlohmann::ordered_json&);

}  // namespace tokenmill::util
