//! The suites that drive sandboxes (`corral-bench SUITE`):
//!
//! | suite | measures |
//! |---|---|
//! | [`join`] | per-exec cost of starting `/bin/true` bare, via `corral run`, an nsenter join, bubblewrap (…); `corral up` |
//! | [`cgi`] | a CGI program behind nginx under h2load per sandbox mode (seed articles 000/001) |
//! | [`micro`] | UnixBench-like workloads natively, in a corral sandbox, in bubblewrap (seed 004) |
//! | [`pidns`] | getpid, fork+wait, thread create+join at pid-namespace depths 0..3 and in corral (seed 002) |
//! | [`neighbours`] | three PHP/static virtual hosts under load, alone, together and with a noisy neighbour, without and with corral CPU limits (seed 003) |
//! | [`scale`] | `corral up`, join latency, memory per idle tenant and `corral down --all` at 10 … 1,000+ tenants |
//! | [`seccomp`] | ns per system call natively, under a one-instruction filter (the floor), under corral's default filter, in corral (issue 15) |
//!
//! [`run`] validates everything first (tools, tenants), then runs the suites
//! in order into one [`ResultSet`], and cleans up everything it started
//! (servers, sandboxes, cgroups, files) on success, failure and Ctrl-C.

pub mod cbuild;
pub mod cgi;
pub mod contenders;
pub mod env;
pub mod headline;
pub mod join;
pub mod micro;
pub mod neighbours;
pub mod nginx;
pub mod pidns;
pub mod scale;
pub mod seccomp;
pub mod sys;
pub mod tools;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::{Machine, Progress, ResultSet};
use env::BenchEnv;
use tools::Tool;

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The articles' sizes.
    Full,
    /// About a tenth: every suite together in a few minutes on 2 CPUs.
    Quick,
    /// Tiny sizes for CI: seconds; the numbers mean nothing.
    Smoke,
}

impl Level {
    /// Pick by level.
    pub fn pick<T>(self, full: T, quick: T, smoke: T) -> T {
        match self {
            Level::Full => full,
            Level::Quick => quick,
            Level::Smoke => smoke,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.pick("full", "quick", "smoke")
    }
}

/// A suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    Join,
    Cgi,
    Micro,
    Pidns,
    Neighbours,
    Scale,
    Seccomp,
}

impl Suite {
    /// `corral-bench all`, in this order.
    pub const ALL: [Suite; 7] = [
        Suite::Join,
        Suite::Cgi,
        Suite::Micro,
        Suite::Pidns,
        Suite::Neighbours,
        Suite::Scale,
        Suite::Seccomp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Suite::Join => "join",
            Suite::Cgi => "cgi",
            Suite::Micro => "micro",
            Suite::Pidns => "pidns",
            Suite::Neighbours => neighbours::SUITE,
            Suite::Scale => scale::SUITE,
            Suite::Seccomp => seccomp::SUITE,
        }
    }

    pub fn parse(s: &str) -> Option<Suite> {
        Suite::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Tools the suite cannot run without.
    pub fn tools(self) -> &'static [Tool] {
        use tools::*;
        match self {
            Suite::Join => &[NSENTER, SETPRIV, BWRAP],
            Suite::Cgi => &[
                NGINX, FCGIWRAP, H2LOAD, BWRAP, PHP_CGI, NSENTER, SETPRIV, TASKSET, TIMEOUT, CC,
            ],
            Suite::Micro => &[BWRAP, TASKSET, CC],
            Suite::Pidns => &[TASKSET, CC],
            Suite::Neighbours => neighbours::TOOLS,
            Suite::Scale => scale::TOOLS,
            Suite::Seccomp => &[TASKSET, CC],
        }
    }
}

/// What to run and with which corral.
#[derive(Debug, Clone)]
pub struct Options {
    pub level: Level,
    /// The `corral` binary whose `run`, `up`, `down` (and `gateway`) are measured.
    pub corral: PathBuf,
    /// Tenants (Unix users); the first one carries the single-tenant workloads.
    pub tenants: Vec<String>,
    /// Progress as lines (no bar), for `--json`.
    pub json: bool,
    /// Where the run's private state directory is created.
    pub state_base: PathBuf,
    /// The run's cgroup parent becomes `<cgroup_base>/bench-<pid>`.
    pub cgroup_base: String,
    /// corral's built-in default profile (the bench profile is derived from it).
    pub default_profile: String,
    /// neighbours: CPU cap per tenant in the limited mode, percent of one CPU
    /// (default [`neighbours::DEFAULT_CPU_LIMIT`]).
    pub cpu_limit: Option<u32>,
    /// seccomp: a second corral binary measured as `corral-old`, against the
    /// same sandbox (whose init, started by the first binary, compiles the
    /// filter: an older client under the current filter).
    pub corral_old: Option<PathBuf>,
}

/// What a run produced: the results of every suite that finished, and the
/// error that stopped the run, if any.
pub struct Outcome {
    pub results: ResultSet,
    pub error: Option<BenchError>,
}

/// Online logical CPUs.
pub fn cpus() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n < 1 {
        1
    } else {
        n as usize
    }
}

/// Everything a suite needs while it runs.
pub struct Ctx<'a> {
    pub opts: &'a Options,
    pub env: BenchEnv,
    pub progress: Progress,
    /// A 0755 scratch directory (compiled programs, nginx prefix, sockets).
    pub work: PathBuf,
    pub cc: PathBuf,
    pub results: ResultSet,
    /// corral's own failures so far (the run goes on, then fails).
    pub failures: Vec<String>,
}

impl Ctx<'_> {
    /// Record a failure of corral itself (not of a peer contender): the
    /// suite goes on, the run ends with an error, the report shows it.
    pub fn corral_failure(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        self.progress.note(&format!("corral failure: {msg}"));
        self.results.add_note(format!("corral failure: {msg}"));
        self.failures.push(msg);
    }

    pub fn level(&self) -> Level {
        self.opts.level
    }

    /// `work/<name>`, created 0755.
    pub fn work_dir(&self, name: &str) -> Result<PathBuf> {
        let d = self.work.join(name);
        std::fs::create_dir_all(&d).map_err(|e| BenchError::io(&d, e))?;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755));
        Ok(d)
    }

    /// Print a line (progress-aware) without advancing.
    pub fn note(&self, msg: &str) {
        self.progress.note(msg);
    }
}

/// Tools recorded in the machine description.
const MACHINE_TOOLS: &[&str] = &[
    "nginx",
    "fcgiwrap",
    "h2load",
    "bwrap",
    "php-cgi",
    "nsenter",
    "cc",
    "firejail",
    "nsjail",
    "minijail0",
];

/// Run `suites` in order. Validation errors (missing tools or tenants) come
/// back before anything is started.
pub fn run(opts: &Options, suites: &[Suite]) -> Outcome {
    let mut results = ResultSet::new(Machine::detect(MACHINE_TOOLS), opts.level != Level::Full);
    match opts.level {
        Level::Quick => results.add_note(
            "quick run (--quick): reduced counts and durations; compare only with other quick runs",
        ),
        Level::Smoke => results.add_note(
            "smoke run (--smoke): tiny sizes to check that everything works; the numbers mean nothing",
        ),
        Level::Full => {}
    }
    let (env, work, cc) = match prepare(opts, suites) {
        Ok(x) => x,
        Err(e) => {
            results.finish();
            return Outcome {
                results,
                error: Some(e),
            };
        }
    };
    let steps: u64 = suites.iter().map(|s| steps(*s, opts)).sum();
    let progress = Progress::new(steps, "corral-bench", opts.json);
    let mut ctx = Ctx {
        opts,
        env,
        progress,
        work,
        cc,
        results,
        failures: Vec::new(),
    };
    let interrupted = run_suites(&mut ctx, suites).err();
    let Ctx {
        mut results,
        env,
        progress,
        failures,
        ..
    } = ctx;
    progress.finish();
    drop(env); // takes the sandboxes down, removes cgroups, mounts and files
    results.finish();
    let error = interrupted
        .or_else(|| (!failures.is_empty()).then_some(BenchError::CorralFailed(failures)));
    Outcome { results, error }
}

fn prepare(opts: &Options, suites: &[Suite]) -> Result<(BenchEnv, PathBuf, PathBuf)> {
    sys::install_interrupt_handler();
    let mut needed: Vec<Tool> = Vec::new();
    for s in suites {
        needed.extend(s.tools());
    }
    let paths = tools::require(&needed)?;
    let cc = needed
        .iter()
        .zip(&paths)
        .find(|(t, _)| t.name == "cc")
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| PathBuf::from("cc"));
    if opts.tenants.is_empty() {
        return Err(BenchError::suite("setup", "no tenants given"));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(BenchError::suite(
            "setup",
            "corral-bench builds sandboxes, cgroups and namespaces: run it as root",
        ));
    }
    let env = BenchEnv::new(
        &opts.corral,
        &opts.state_base,
        &opts.cgroup_base,
        &opts.tenants,
        &opts.default_profile,
    )?;
    let work = env.root().join("work");
    std::fs::create_dir_all(&work).map_err(|e| BenchError::io(&work, e))?;
    let _ = std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755));
    Ok((env, work, cc))
}

fn steps(s: Suite, opts: &Options) -> u64 {
    match s {
        Suite::Join => join::steps(opts),
        Suite::Cgi => cgi::steps(opts),
        Suite::Micro => micro::steps(opts),
        Suite::Pidns => pidns::steps(opts),
        Suite::Neighbours => neighbours::steps(opts),
        Suite::Scale => scale::steps(opts),
        Suite::Seccomp => seccomp::steps(opts),
    }
}

/// Run the suites; a suite that fails is recorded (its servers and files
/// are already gone) and the next one runs. Only Ctrl-C stops the run.
fn run_suites(ctx: &mut Ctx, suites: &[Suite]) -> Result<()> {
    for s in suites {
        sys::check_interrupt()?;
        ctx.note(&format!("== {} ({} run)", s.name(), ctx.level().as_str()));
        let r = match s {
            Suite::Join => join::run(ctx),
            Suite::Cgi => cgi::run(ctx),
            Suite::Micro => micro::run(ctx),
            Suite::Pidns => pidns::run(ctx),
            Suite::Neighbours => neighbours::run(ctx),
            Suite::Scale => scale::run(ctx),
            Suite::Seccomp => seccomp::run(ctx),
        };
        match r {
            Ok(()) => {}
            Err(BenchError::Interrupted) => return Err(BenchError::Interrupted),
            Err(e) => {
                let msg = e.to_string();
                if msg.starts_with(&format!("{}:", s.name())) {
                    ctx.corral_failure(msg);
                } else {
                    ctx.corral_failure(format!("{}: {msg}", s.name()));
                }
            }
        }
    }
    Ok(())
}

/// A path as a `String` argument.
pub fn arg(p: &Path) -> String {
    p.display().to_string()
}
