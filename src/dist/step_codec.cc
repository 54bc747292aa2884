#include "dist/step_codec.h"

#include "util/error.h"

namespace tokenmill::dist {

std::vector<int64_t> encode_forward(std::span<const std::vector<kv::BlockCopy>> copies,
                                    std::span<const model::SequenceChunk> chunks,
                                    std::span<const uint8_t> skip_layers) {
  // kind, pools, per pool: n, (src, dst) x n; chunks, per chunk: start_pos,
  // rope_offset, logits, n, tokens x n, per pool: first, n, blocks x n; skip n, flags x n.
  std::vector<int64_t> m{static_cast<int64_t>(MessageKind::kForward), static_cast<int64_t>(copies.size())};
  for (const auto& pool : copies) {
    m.push_back(static_cast<int64_t>(pool.size()));
    for (const kv::BlockCopy& c : pool) m.insert(m.end(), {c.src, c.dst});
  }
  m.push_back(static_cast<int64_t>(chunks.size()));
  for (const model::SequenceChunk& ch : chunks) {
    m.insert(m.end(),
             {ch.start_pos, ch.rope_offset, static_cast<int64_t>(ch.logits), static_cast<int64_t>(ch.tokens.size())});
    m.insert(m.end(), ch.tokens.begin(), ch.tokens.end());
    m.push_back(static_cast<int64_t>(ch.tables.size()));
    for (const model::ChunkTable& t : ch.tables) {
      m.insert(m.end(), {t.first, static_cast<int64_t>(t.blocks.size())});
      m.insert(m.end(), t.blocks.begin(), t.blocks.end());
    }
  }
  m.push_back(static_cast<int64_t>(skip_layers.size()));
  m.insert(m.end(), skip_layers.begin(), skip_layers.end());
  return m;
}

std::vector<int64_t> encode_pool_sizes(std::span<const int64_t> blocks) {
  std::vector<int64_t> m{static_cast<int64_t>(MessageKind::kPoolSizes), static_cast<int64_t>(blocks.size())};
  m.insert(m.end(), blocks.begin(), blocks.end());
  return m;
}

std::vector<int64_t> encode_stop() { return {static_cast<int64_t>(MessageKind::kStop)}; }

MessageKind message_kind(std::span<const int64_t> message) {
  if (message.empty() || message[0] < 0 || message[0] > 2) fail("parallel step message: unknown kind");
  return static_cast<MessageKind>(message[0]);
}

namespace {

// Reads a message front to back, refusing to run past its end.
class Reader {
 public:
  explicit Reader(std::span<const int64_t> m) : m_(m) {}
  int64_t next() {
    if (pos_ >= m_.size()) fail("parallel step message: truncated at element {}", pos_);
    return m_[pos_++];
  }
  // A count that the rest of the message can hold (each item >= 1 element).
  size_t count() {
    const int64_t n = next();
    if (n < 0 || static_cast<size_t>(n) > m_.size() - pos_)
      fail("parallel step message: count {} at element {} is out of range", n, pos_ - 1);
    return static_cast<size_t>(n);
  }
  bool done() const { return pos_ == m_.size(); }

 private:
  std::span<const int64_t> m_;
  size_t pos_ = 0;
};

}  // namespace

DecodedStep decode_forward(std::span<const int64_t> message) {
  Reader r(message);
  if (r.next() != static_cast<int64_t>(MessageKind::kForward)) fail("parallel step message: not a forward pass");
  DecodedStep d;
  const size_t pools = r.count();
  d.copies.resize(pools);
  for (auto& pool : d.copies) {
    const size_t n = r.count();
    for (size_t i = 0; i < n; ++i) {
      const auto src = static_cast<kv::BlockId>(r.next());
      const auto dst = static_cast<kv::BlockId>(r.next());
      pool.push_back({src, dst});
    }
  }
  const size_t num_chunks = r.count();
  d.tokens.resize(num_chunks);
  d.chunks.resize(num_chunks);
  std::vector<int64_t> firsts;
  for (size_t c = 0; c < num_chunks; ++c) {
    model::SequenceChunk& ch = d.chunks[c];
    ch.start_pos = r.next();
    ch.rope_offset = r.next();
    const int64_t rows = r.next();
    if (rows < 0 || rows > 2) fail("parallel step message: bad logits rows {}", rows);
    ch.logits = static_cast<model::LogitRows>(rows);
    const size_t n = r.count();
    for (size_t i = 0; i < n; ++i) d.tokens[c].push_back(static_cast<int32_t>(r.next()));
    if (r.count() != pools) fail("parallel step message: chunk {} has tables for another pool count", c);
    for (size_t g = 0; g < pools; ++g) {
      firsts.push_back(r.next());
      std::vector<int32_t>& blocks = d.blocks.emplace_back();
      const size_t nb = r.count();
      for (size_t i = 0; i < nb; ++i) blocks.push_back(static_cast<int32_t>(r.next()));
    }
  }
  const size_t num_skip = r.count();
  for (size_t i = 0; i < num_skip; ++i) d.skip_layers.push_back(static_cast<uint8_t>(r.next() != 0));
  if (!r.done()) fail("parallel step message: trailing elements");
  // The views, now that the vectors no longer move.
  for (size_t i = 0; i < d.blocks.size(); ++i) d.tables.push_back(model::ChunkTable{d.blocks[i], firsts[i]});
  for (size_t c = 0; c < num_chunks; ++c) {
    d.chunks[c].tokens = d.tokens[c];
    d.chunks[c].tables = std::span<const model::ChunkTable>(d.tables).subspan(c * pools, pools);
  }
  return d;
}

std::vector<int64_t> decode_pool_sizes(std::span<const int64_t> message) {
  Reader r(message);
  if (r.next() != static_cast<int64_t>(MessageKind::kPoolSizes)) fail("parallel step message: not the pool sizes");
  std::vector<int64_t> blocks(r.count());
  for (int64_t& b : blocks) b = r.next();
  if (!r.done()) fail("parallel step message: trailing elements");
  return blocks;
}

}  // namespace tokenmill::dist
