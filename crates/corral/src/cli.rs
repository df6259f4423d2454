//! Command-line interface (clap). Every command accepts the global options.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "corral",
    version,
    about = "Persisted per-tenant sandboxes for shared web hosting",
    long_about = "corral gives every tenant (by default a Unix user) a sandbox built once from a profile \
template: mount, pid, ipc, uts and cgroup namespaces (optionally net and user) held by a tiny per-tenant \
init, plus cgroup limits. Later processes join it in constant time.\n\n\
Typical use:\n  corral up alice                 build alice's sandbox (idempotent)\n  \
corral run alice -- php -v      run a command inside it (brings it up if needed)\n  \
corral ls                       list sandboxes\n  corral down alice               stop it and remove its state",
    after_help = "Files: the profile template is <config-dir>/profile.toml (built-in default if absent), \
per-tenant overrides <config-dir>/tenants/NAME.toml, plans <config-dir>/plans/NAME.toml. \
`corral profile default` prints the built-in template with comments."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

const RUN_AFTER_HELP: &str = "Exit status: the command's own; 128+N if it was killed by signal N; \
75 if the tenant's entry-process limit is reached; 125 if corral itself failed; 126/127 if the \
command could not be executed / was not found.";

/// `corral run ...` alone, parsed without the rest of the command tree.
/// `run` is the hot path (a CGI wrapper or shebang interpreter starts it for
/// every request), and clap builds every subcommand it knows before parsing
/// (the bench alone has dozens of options): measured 0.1 ms of each run.
/// Same options, help and errors as the `run` subcommand of [`Cli`].
#[derive(Parser, Debug)]
#[command(name = "corral run", about = "Run a command inside a tenant's sandbox (brings it up first if needed)", after_help = RUN_AFTER_HELP)]
pub struct RunCli {
    #[command(flatten)]
    pub global: Global,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Configuration directory (profile.toml, tenants/, plans/).
    #[arg(long, global = true, env = "CORRAL_CONFIG_DIR", default_value = "/etc/corral")]
    pub config_dir: PathBuf,
    /// State directory (one subdirectory per running sandbox).
    #[arg(long, global = true, env = "CORRAL_STATE_DIR", default_value = "/run/corral")]
    pub state_dir: PathBuf,
    /// cgroup parent below the cgroup root that holds every tenant's cgroup.
    #[arg(long, global = true, env = "CORRAL_CGROUP_PARENT", default_value = "corral")]
    pub cgroup_parent: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Build a tenant's sandbox (does nothing if it is already up).
    Up(TenantsArg),
    /// Run a command inside a tenant's sandbox (brings it up first if needed).
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Stop a tenant's sandbox: kill everything in it, remove its state and cgroup.
    Down(DownArgs),
    /// Take a sandbox down and build it again (e.g. after changing the profile).
    Restart(TenantsArg),
    /// List sandboxes with their init pid, age and whether the profile changed since.
    Ls,
    /// Validate a profile template (default: the configured one) or a tenant's effective profile.
    Check(CheckArgs),
    /// Print profiles.
    #[command(subcommand)]
    Profile(ProfileCmd),
    /// Show a tenant's limits, change them live, or re-read plans.
    #[command(subcommand)]
    Limits(LimitsCmd),
    /// One-shot usage and fault counters per tenant (CPU %, memory, processes, IO, entry processes).
    Stats(StatsArgs),
    /// Live, refreshing usage per tenant, sortable (like lvetop).
    Top(TopArgs),
    /// FastCGI gateway: run CGI scripts inside their tenant's sandbox (replaces fcgiwrap behind nginx).
    Gateway(crate::cmd::gateway::GatewayArgs),
    /// CGI wrapper for servers without FastCGI: run the requested script inside its tenant's sandbox.
    Cgi(crate::cmd::cgi::CgiArgs),
    /// Benchmarks: join, cgi, micro, pidns or all suites (reports in --out), or compare two runs.
    #[command(subcommand)]
    Bench(crate::cmd::bench::BenchCmd),
}

#[derive(Subcommand, Debug)]
pub enum LimitsCmd {
    /// Effective limits (of the running sandbox, else from the profile and plan).
    Show { tenant: String },
    /// Change limits of a running tenant without restarting it, e.g. `cpu=50% memory.max=512M processes=200`.
    #[command(after_help = "Keys: cpu cpu.weight memory.max memory.high memory.swap_max processes io.read_bps io.write_bps \
io.read_iops io.write_iops entry_processes rlimits.nofile rlimits.core rlimits.cpu rlimits.as. \
Values: 50%, 512M, 1G, a number, or max. All are validated before any is applied. \
Changes last until the sandbox is rebuilt: put permanent ones in the tenant's override file.")]
    Set {
        tenant: String,
        #[arg(required = true, value_name = "KEY=VALUE")]
        assignments: Vec<String>,
    },
    /// Re-read profiles and plans and apply them to running tenants (all if none named).
    Reload { tenants: Vec<String> },
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Only this tenant (default: every running tenant).
    pub tenant: Option<String>,
    /// Sampling window for rates (CPU %, IO/s), in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval_ms: u64,
}

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Sort by: cpu, mem, procs, io, faults, name.
    #[arg(long, default_value = "cpu", value_parser = ["cpu", "mem", "procs", "io", "faults", "name"])]
    pub sort: String,
    /// Refresh interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Stop after this many refreshes (default: until Ctrl-C).
    #[arg(long)]
    pub iterations: Option<u64>,
}

#[derive(Args, Debug)]
pub struct TenantsArg {
    /// Tenant names (Unix user names).
    #[arg(required = true)]
    pub tenants: Vec<String>,
}

#[derive(Args, Debug)]
pub struct DownArgs {
    /// Tenant names.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub tenants: Vec<String>,
    /// Every sandbox in the state dir, including half-created and dead ones.
    #[arg(long)]
    pub all: bool,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Tenant name.
    pub tenant: String,
    /// Working directory inside the sandbox (default: the profile's workdir).
    #[arg(long)]
    pub cwd: Option<String>,
    /// Set an environment variable (repeatable), on top of the profile's.
    #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Pass the caller's file descriptors 3..3+N to the command (all others are closed).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub preserve_fds: u16,
    /// Start the command as a service of the tenant init and return at once
    /// (it keeps running after this command exits, until `corral down`).
    #[arg(long)]
    pub detach: bool,
    /// With --detach: append the service's stdout and stderr to FILE (host path).
    #[arg(long, requires = "detach", value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// A template file to validate; without it, the configured template.
    pub file: Option<PathBuf>,
    /// Also expand and validate the effective profile of this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ProfileCmd {
    /// Print the built-in default template (a commented starting point for profile.toml).
    Default,
    /// Print a tenant's effective profile: template + overrides, variables expanded.
    Show { tenant: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `corral run` parsed alone takes exactly the options of the `run`
    /// subcommand (with the global ones) and says the same about them.
    #[test]
    fn run_alone_matches_the_run_subcommand() {
        let describe = |c: &clap::Command| {
            let mut v: Vec<(String, Option<String>, bool)> =
                c.get_arguments().map(|a| (a.get_id().to_string(), a.get_help().map(|h| h.to_string()), a.is_required_set())).collect();
            v.sort();
            v
        };
        let mut tree = Cli::command();
        tree.build();
        let sub = tree.find_subcommand("run").expect("run subcommand").clone();
        let alone = RunCli::command();
        let ours: Vec<_> = describe(&alone).into_iter().filter(|(id, ..)| id != "help").collect();
        let theirs: Vec<_> = describe(&sub).into_iter().filter(|(id, ..)| id != "help").collect();
        assert_eq!(ours, theirs);
        assert_eq!(alone.get_after_help().map(|h| h.to_string()), sub.get_after_help().map(|h| h.to_string()));
        assert_eq!(alone.get_about().map(|h| h.to_string()), sub.get_about().map(|h| h.to_string()));
        let parsed = RunCli::try_parse_from(["corral run", "--state-dir", "/s", "--env", "A=1", "t1", "--", "id", "-u"]).unwrap();
        assert_eq!(parsed.global.state_dir, PathBuf::from("/s"));
        assert_eq!((parsed.run.tenant.as_str(), parsed.run.env.clone(), parsed.run.command.clone()), ("t1", vec!["A=1".to_string()], vec!["id".to_string(), "-u".to_string()]));
        assert!(RunCli::try_parse_from(["corral run", "t1"]).is_err(), "the command is required");
    }
}
