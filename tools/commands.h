// The subcommands of `weightlift`, one file each (cmd_<name>.cc). Each Add*
// registers its flags on PARENT and returns the runner main() calls when
// that subcommand was given; the runner returns the process exit code.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace weightlift::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

struct LoadFlags;
// Registers --device --backend --gds --threads --chunk --staging.
void AddLoadFlags(CLI::App* app, LoadFlags* flags);

Command AddInspect(CLI::App& parent);
Command AddVerify(CLI::App& parent);
Command AddLoad(CLI::App& parent);
Command AddSynth(CLI::App& parent);
Command AddBench(CLI::App& parent);
Command AddDemo(CLI::App& parent);

}  // namespace weightlift::cli
