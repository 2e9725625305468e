// The subcommands' options structs (src/cli/commands.h, app.h): each parser fills its own struct, so nothing
// carries over from one parse (or pipeline step) to the next; --force is read from the parsed struct; the flags a
// pipeline step prints parse back into the very struct the step runs.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <type_traits>

#include "cli/app.h"
#include "cli/commands.h"

using namespace daei::cli;

namespace {

// Parses `args` with the flags of C into a fresh struct, as `daei CMD args` would.
template <class C>
C parse(const std::string& args) {
  CLI::App app;
  C c;
  add_flags(app, c);
  app.parse(args, false);
  return c;
}

TrainCommand last_seen;  // what the bound run function last saw (test only)
int remember(Context&, const TrainCommand& c) {
  last_seen = c;
  return 0;
}
int ignore(Context&, const HypothesesCommand&) { return 0; }

}  // namespace

TEST(CliCommands, PrintedStepArgsParseBackToTheSameStruct) {
  TrainCommand t;
  t.stage = "noisy-corrector";
  t.resume = true;
  EXPECT_EQ(command_args(t), "--stage noisy-corrector --resume");
  const auto tp = parse<TrainCommand>(command_args(t));
  EXPECT_EQ(tp.stage, t.stage);
  EXPECT_TRUE(tp.resume);
  EXPECT_FALSE(tp.force);

  EXPECT_EQ(command_args(CacheBuildCommand{"val", true}), "--split val --clean");
  EXPECT_EQ(command_args(CacheBuildCommand{"train", false}), "--split train");
  const auto cp = parse<CacheBuildCommand>(command_args(CacheBuildCommand{"ood-x", true}));
  EXPECT_EQ(cp.split, "ood-x");
  EXPECT_TRUE(cp.clean);

  EXPECT_EQ(command_args(HypothesesCommand{"dae-corrector"}), "--for dae-corrector");
  EXPECT_EQ(parse<HypothesesCommand>(command_args(HypothesesCommand{"dae-corrector"})).for_stage, "dae-corrector");
  EXPECT_EQ(command_args(CorpusBuildCommand{}), "");
  EXPECT_TRUE(parse<CorpusBuildCommand>(command_args(CorpusBuildCommand{true})).force);
  EXPECT_EQ(command_args(EvalCommand{}), "");
  EvalCommand e;
  e.split_files = {"a.jsonl", "b.jsonl"};
  e.sigmas = "0.02,0.04";
  const auto ep = parse<EvalCommand>(command_args(e));
  EXPECT_EQ(ep.split_files, e.split_files);
  EXPECT_EQ(ep.sigmas, e.sigmas);
  EXPECT_FALSE(ep.dae_only);
}

TEST(CliCommands, NoFlagCarriesOverBetweenParses) {
  // Formerly one set of file statics took every parse: a --clean, --force or --for stayed for the next step.
  EXPECT_TRUE(parse<CacheBuildCommand>("--split val --clean").clean);
  EXPECT_FALSE(parse<CacheBuildCommand>("--split train").clean);
  EXPECT_TRUE(parse<TrainCommand>("--stage 1 --force").force);
  const auto next = parse<TrainCommand>("--stage 2 --resume");
  EXPECT_FALSE(next.force);
  EXPECT_TRUE(next.resume);
  EXPECT_EQ(parse<HypothesesCommand>("--for noisy-corrector").for_stage, "noisy-corrector");
  EXPECT_EQ(parse<HypothesesCommand>("").for_stage, "4");  // the default again
}

// Issue 64: a Context is made only with what its readers dereference (the communicator); no default one exists.
static_assert(!std::is_default_constructible_v<Context>, "cli::Context must be built with its communicator");

TEST(CliCommands, BoundCommandReadsItsOwnParsedStruct) {
  auto bind = bind_options<TrainCommand>(add_flags, remember);
  CLI::App first, second;
  BoundCommand a = bind(first), b = bind(second);
  first.parse("--stage 1 --force", false);
  second.parse("--stage 3", false);
  EXPECT_TRUE(a.forced());  // main's config guard reads --force from here (no second look at argv)
  EXPECT_FALSE(b.forced());
  Context ctx(daei::Config(YAML::Node()), std::make_unique<daei::LocalCommunicator>(), {}, "");
  EXPECT_EQ(b.run(ctx), 0);
  EXPECT_EQ(last_seen.stage, "3");
  EXPECT_FALSE(last_seen.force);
  EXPECT_EQ(a.run(ctx), 0);
  EXPECT_EQ(last_seen.stage, "1");
  EXPECT_TRUE(last_seen.force);
  EXPECT_FALSE(a.validate);  // none given

  // A command without --force never forces.
  CLI::App h;
  BoundCommand hb = bind_options<HypothesesCommand>(add_flags, ignore)(h);
  h.parse("--for 4", false);
  EXPECT_FALSE(hb.forced());
}
