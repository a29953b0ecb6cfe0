// `weightlift`: inspect, verify, load, synthesize and benchmark safetensors
// checkpoints. This file only wires CLI11; every subcommand lives in its own
// cmd_<name>.cc and every error goes through cli_util's exit-code mapping.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "cli_util.h"
#include "commands.h"

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; everything else
    // is a usage error.
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  std::fprintf(stderr, "weightlift: error: no subcommand given\n");
  return kExitUsage;
}
