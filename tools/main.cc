// `weightlift`: inspect, verify, load, synthesize and benchmark safetensors
// checkpoints. This file only wires CLI11; every subcommand lives in its own
// cmd_<name>.cc and every error goes through cli_util's exit-code mapping.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli_util.h"
#include "commands.h"

namespace {

using weightlift::cli::Command;

const Command* FindCommand(const std::vector<Command>& commands,
                           std::string_view name) {
  for (const Command& c : commands) {
    if (c.app->get_name() == name) return &c;
  }
  return nullptr;
}

// "expected inspect, verify, ... or demo; see weightlift --help"
std::string CommandList(const std::vector<Command>& commands) {
  std::string s = "expected ";
  for (size_t i = 0; i < commands.size(); ++i) {
    if (i > 0) s += i + 1 == commands.size() ? " or " : ", ";
    s += commands[i].app->get_name();
  }
  return s + "; see weightlift --help";
}

// One line on stderr, newlines in MESSAGE folded, and the usage exit code.
int UsageError(std::string message) {
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  while (!message.empty() && message.back() == ' ') message.pop_back();
  std::fprintf(stderr, "weightlift: error: %s\n", message.c_str());
  std::fflush(stderr);
  return weightlift::cli::kExitUsage;
}

// An empty value (--threads '', --cache '') is a usage error for every
// option that takes one: CLI11 would read it as the default (0, or no
// path), so the command would run with a setting the user did not give.
void RefuseEmptyValues(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_size() == 0) continue;  // a flag: no value
    o->check(CLI::Validator(
        [](std::string& v) {
          return v.empty() ? std::string("an empty value is not allowed")
                           : std::string();
        },
        "", "NonEmpty"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    RefuseEmptyValues(*sub);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weightlift::cli;
  CLI::App app{
      "weightlift: load safetensors checkpoints into GPU or host memory as "
      "fast as the hardware allows, treating every file as untrusted input.",
      "weightlift"};
  app.require_subcommand(1);
  app.footer(std::string("\n") + kExitCodesHelp +
             "\nRun 'weightlift SUBCOMMAND --help' for a subcommand's flags.");
  app.set_version_flag("--version", "weightlift 0.1.0");

  std::vector<Command> commands = {
      AddInspect(app), AddVerify(app), AddLoad(app),
      AddSynth(app),   AddBench(app),  AddDemo(app),
  };
  RefuseEmptyValues(app);

  // An unknown first word is named as a command, not reported as an
  // argument CLI11 did not expect.
  if (argc >= 2 && argv[1][0] != '-' &&
      FindCommand(commands, argv[1]) == nullptr) {
    return UsageError("unknown command '" + std::string(argv[1]) + "' (" +
                      CommandList(commands) + ")");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kExitOk : kExitUsage;
    // Everything else is the one-line usage error tools/README.md promises,
    // prefixed with the subcommand being parsed.
    std::string where;
    for (const Command& c : commands) {
      if (c.app->parsed()) where = c.app->get_name() + ": ";
    }
    if (argc < 2)
      return UsageError("no command given (" + CommandList(commands) + ")");
    return UsageError(where + e.what());
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return UsageError("no command given (" + CommandList(commands) + ")");
}
