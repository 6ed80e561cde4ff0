// Test-only GGUF writer: builds small files (fixtures) for the loader's edge cases.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "quant/fp16.h"

namespace kvtest {

class GgufBuilder {
 public:
  void kv_u32(const std::string& key, std::uint32_t v) { begin_kv(key, 4), put(v); ++kvs_; }
  void kv_f32(const std::string& key, float v) { begin_kv(key, 6), put(v); ++kvs_; }
  void kv_str(const std::string& key, const std::string& v) { begin_kv(key, 8), put_str(v); ++kvs_; }
  void kv_str_array(const std::string& key, const std::vector<std::string>& v) {
    begin_kv(key, 9), put(std::uint32_t{8}), put(static_cast<std::uint64_t>(v.size()));
    for (const auto& s : v) put_str(s);
    ++kvs_;
  }
  void kv_f32_array(const std::string& key, const std::vector<float>& v) {
    begin_kv(key, 9), put(std::uint32_t{6}), put(static_cast<std::uint64_t>(v.size()));
    for (float x : v) put(x);
    ++kvs_;
  }

  // type: 0 F32, 1 F16, 8 Q8_0, 30 BF16 (values encoded accordingly); other types write raw
  // zero bytes of `raw_bytes` length.
  void tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type, const std::vector<float>& values,
              std::size_t raw_bytes = 0) {
    Tensor t{name, std::move(ne), type, encode(type, values, raw_bytes)};
    tensors_.push_back(std::move(t));
  }

  std::vector<std::byte> build(std::uint32_t version = 3, std::uint64_t alignment = 32) const {
    std::vector<std::byte> out;
    auto emit = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::byte*>(p);
      out.insert(out.end(), b, b + n);
    };
    const std::uint32_t magic = 0x46554747;
    emit(&magic, 4);
    emit(&version, 4);
    const std::uint64_t tensor_count = tensors_.size(), kv_count = kvs_;
    emit(&tensor_count, 8);
    emit(&kv_count, 8);
    out.insert(out.end(), kv_bytes_.begin(), kv_bytes_.end());
    std::uint64_t offset = 0;
    for (const Tensor& t : tensors_) {
      const std::uint64_t len = t.name.size();
      emit(&len, 8);
      emit(t.name.data(), t.name.size());
      const auto dims = static_cast<std::uint32_t>(t.ne.size());
      emit(&dims, 4);
      for (std::uint64_t n : t.ne) emit(&n, 8);
      emit(&t.type, 4);
      emit(&offset, 8);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    while (out.size() % alignment != 0) out.push_back(std::byte{0});
    for (const Tensor& t : tensors_) {
      out.insert(out.end(), t.data.begin(), t.data.end());
      while (out.size() % alignment != 0) out.push_back(std::byte{0});
    }
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<std::uint64_t> ne;
    std::uint32_t type;
    std::vector<std::byte> data;
  };

  template <typename T>
  void put(T v) {
    const auto* b = reinterpret_cast<const std::byte*>(&v);
    kv_bytes_.insert(kv_bytes_.end(), b, b + sizeof(T));
  }
  void put_str(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    const auto* b = reinterpret_cast<const std::byte*>(s.data());
    kv_bytes_.insert(kv_bytes_.end(), b, b + s.size());
  }
  void begin_kv(const std::string& key, std::uint32_t type) {
    put_str(key);
    put(type);
  }
  static std::vector<std::byte> encode(std::uint32_t type, const std::vector<float>& values, std::size_t raw_bytes) {
    std::vector<std::byte> data;
    auto emit = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::byte*>(p);
      data.insert(data.end(), b, b + n);
    };
    if (type == 0) {
      emit(values.data(), values.size() * 4);
    } else if (type == 1) {
      for (float x : values) {
        const std::uint16_t h = kv::f32_to_f16(x);
        emit(&h, 2);
      }
    } else if (type == 30) {
      for (float x : values) {
        std::uint32_t bits;
        std::memcpy(&bits, &x, 4);
        const auto b = static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
        emit(&b, 2);
      }
    } else if (type == 8) {
      for (std::size_t i = 0; i < values.size(); i += 32) {
        float absmax = 0.0f;
        for (std::size_t j = 0; j < 32; ++j) absmax = std::max(absmax, std::fabs(values[i + j]));
        const float d = absmax / 127.0f;
        const std::uint16_t dh = kv::f32_to_f16(d);
        emit(&dh, 2);
        for (std::size_t j = 0; j < 32; ++j) {
          const auto q = static_cast<std::int8_t>(d > 0 ? std::lrint(values[i + j] / d) : 0);
          emit(&q, 1);
        }
      }
    } else {
      data.resize(raw_bytes);
    }
    return data;
  }

  std::vector<std::byte> kv_bytes_;
  std::uint64_t kvs_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace kvtest
