// weightlift inspect PATH [--json]: what a checkpoint holds, from its
// validated headers alone (no tensor data is read).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"
#include "commands.h"

namespace weightlift::cli {
namespace {

struct InspectArgs {
  std::string path;
  bool json = false;
};

struct FileTotals {
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

std::vector<FileTotals> PerFile(const Checkpoint& ckpt) {
  std::vector<FileTotals> per(ckpt.files().size());
  for (const TensorInfo& t : ckpt.tensors()) {
    if (t.file < per.size()) {
      per[t.file].tensors++;
      per[t.file].bytes += t.size;
    }
  }
  return per;
}

// __metadata__ as an object, or null when the header has no such key (as
// safetensors returns None), so {} and absent stay apart.
nlohmann::ordered_json MetadataJson(const FileInfo& f) {
  if (!f.has_metadata) return nullptr;
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : f.metadata) m[k] = v;
  return m;
}

std::string ToJson(const std::string& path, const Checkpoint& ckpt) {
  using Json = nlohmann::ordered_json;
  const std::vector<FileTotals> per = PerFile(ckpt);
  Json out;
  out["path"] = path;
  out["index"] = ckpt.index_path();
  Json files = Json::array();
  for (size_t i = 0; i < ckpt.files().size(); ++i) {
    const FileInfo& f = ckpt.files()[i];
    Json jf;
    jf["index"] = i;
    jf["path"] = f.path;
    jf["resolved_path"] = f.resolved_path;
    jf["size"] = f.size;
    jf["header_size"] = f.header_size;
    jf["data_offset"] = f.data_offset;
    jf["tensors"] = per[i].tensors;
    jf["bytes"] = per[i].bytes;
    jf["metadata"] = MetadataJson(f);
    files.push_back(std::move(jf));
  }
  out["files"] = std::move(files);
  Json tensors = Json::array();
  std::map<std::string, FileTotals> by_dtype;
  for (const TensorInfo& t : ckpt.tensors()) {
    Json jt;
    jt["name"] = t.name;
    jt["dtype"] = std::string(DTypeName(t.dtype));
    jt["shape"] = t.shape;
    jt["bytes"] = t.size;
    jt["file"] = t.file;
    jt["file_path"] = ckpt.files()[t.file].path;
    jt["offset"] = t.offset;
    tensors.push_back(std::move(jt));
    FileTotals& d = by_dtype[std::string(DTypeName(t.dtype))];
    d.tensors++;
    d.bytes += t.size;
  }
  out["tensors"] = std::move(tensors);
  // The first file's, as safetensors' metadata() returns it.
  out["metadata"] = ckpt.files().empty() ? nlohmann::ordered_json()
                                         : MetadataJson(ckpt.files().front());
  Json totals;
  totals["files"] = ckpt.files().size();
  totals["tensors"] = ckpt.tensors().size();
  totals["bytes"] = ckpt.total_bytes();
  totals["by_dtype"] = Json::object();
  for (const auto& [name, d] : by_dtype) {
    totals["by_dtype"][name] = {{"tensors", d.tensors}, {"bytes", d.bytes}};
  }
  out["totals"] = std::move(totals);
  // Names and metadata passed UTF-8 validation in Open; replace anyway so
  // a dump can never throw.
  return out.dump(2, ' ', false, Json::error_handler_t::replace);
}

void PrintText(const std::string& path, const Checkpoint& ckpt) {
  const std::vector<FileTotals> per = PerFile(ckpt);
  std::printf("checkpoint: %s\n", Printable(path).c_str());
  if (!ckpt.index_path().empty()) {
    std::printf("index:      %s\n", Printable(ckpt.index_path()).c_str());
  }
  std::printf("\nfiles (%zu):\n", ckpt.files().size());
  for (size_t i = 0; i < ckpt.files().size(); ++i) {
    const FileInfo& f = ckpt.files()[i];
    std::printf("  [%zu] %s\n", i, Printable(f.path).c_str());
    std::printf(
        "      size %s (%llu B), header %llu B, %llu tensors, "
        "%s of tensor data\n",
        FormatBytes(f.size).c_str(), static_cast<unsigned long long>(f.size),
        static_cast<unsigned long long>(f.header_size),
        static_cast<unsigned long long>(per[i].tensors),
        FormatBytes(per[i].bytes).c_str());
    for (const auto& [k, v] : f.metadata) {
      std::printf("      metadata %s = %s\n", Printable(k).c_str(),
                  Printable(v).c_str());
    }
  }

  // Tensor table with columns sized to their content.
  struct Row {
    std::string name, dtype, shape, bytes, file, offset;
  };
  std::vector<Row> rows;
  rows.push_back({"name", "dtype", "shape", "bytes", "file", "offset"});
  std::map<std::string, FileTotals> by_dtype;
  for (const TensorInfo& t : ckpt.tensors()) {
    rows.push_back({Printable(t.name), std::string(DTypeName(t.dtype)),
                    FormatShape(t.shape), std::to_string(t.size),
                    std::to_string(t.file), std::to_string(t.offset)});
    FileTotals& d = by_dtype[std::string(DTypeName(t.dtype))];
    d.tensors++;
    d.bytes += t.size;
  }
  size_t w[6] = {0, 0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    const std::string* cols[6] = {&r.name,  &r.dtype, &r.shape,
                                  &r.bytes, &r.file,  &r.offset};
    for (int c = 0; c < 6; ++c) w[c] = std::max(w[c], cols[c]->size());
  }
  std::printf("\ntensors (%zu):\n", ckpt.tensors().size());
  for (const Row& r : rows) {
    std::printf("  %-*s  %-*s  %-*s  %*s  %*s  %*s\n", int(w[0]),
                r.name.c_str(), int(w[1]), r.dtype.c_str(), int(w[2]),
                r.shape.c_str(), int(w[3]), r.bytes.c_str(), int(w[4]),
                r.file.c_str(), int(w[5]), r.offset.c_str());
  }

  std::printf("\nmetadata:");
  if (ckpt.files().empty() || !ckpt.files().front().has_metadata) {
    std::printf(" (none: no __metadata__)");
  } else if (ckpt.metadata().empty()) {
    std::printf(" (empty)");
  }
  std::printf("\n");
  for (const auto& [k, v] : ckpt.metadata()) {
    std::printf("  %s = %s\n", Printable(k).c_str(), Printable(v).c_str());
  }

  std::printf("\ntotal: %zu tensors, %s (%llu B) in %zu file%s\n",
              ckpt.tensors().size(), FormatBytes(ckpt.total_bytes()).c_str(),
              static_cast<unsigned long long>(ckpt.total_bytes()),
              ckpt.files().size(), ckpt.files().size() == 1 ? "" : "s");
  for (const auto& [name, d] : by_dtype) {
    std::printf("  %-12s %llu tensors, %s\n", name.c_str(),
                static_cast<unsigned long long>(d.tensors),
                FormatBytes(d.bytes).c_str());
  }
}

int Run(const InspectArgs& args) {
  StatusOr<Checkpoint> ckpt = OpenCheckpoint(args.path);
  if (!ckpt.ok()) return ReportError(ckpt.status());
  if (args.json) {
    std::printf("%s\n", ToJson(args.path, *ckpt).c_str());
  } else {
    PrintText(args.path, *ckpt);
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitIo;
}

}  // namespace

Command AddInspect(CLI::App& parent) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* app = parent.add_subcommand(
      "inspect",
      "List files, tensors (name, dtype, shape, bytes, file, offset), "
      "metadata and totals. Reads and validates headers only.");
  app->add_option("PATH", args->path,
                  "a .safetensors file, a model.safetensors.index.json, or a "
                  "directory holding either")
      ->required();
  app->add_flag("--json", args->json, "print one JSON object");
  return {app, [args] { return Run(*args); }};
}

}  // namespace weightlift::cli
