//! `corral-bench SUITE` and `corral-bench compare OLD NEW`: corral's
//! benchmark suites as a program of their own (see docs/benchmarks.md). The
//! code that creates system users, network namespaces and web servers is not
//! part of the `corral` an operator installs; this program drives that
//! `corral` (by default the one next to it) as a user would.

use clap::{Args, Parser, Subcommand};
use corral_bench::suites::{self, headline, Level, Options, Suite};
use corral_bench::{compare, BenchError, ResultSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The bench itself failed (the status `corral` uses for its own failures).
const EXIT_FAILURE: i32 = 125;

/// The tenants used when `--tenants` is not given (scripts/test-users.sh).
const DEFAULT_TENANTS: &str = "corral-demo1,corral-demo2";

#[derive(Parser, Debug)]
#[command(
    name = "corral-bench",
    version,
    about = "corral's benchmarks: join, cgi, micro, pidns, neighbours, scale or seccomp (reports in --out), or compare two runs",
    after_help = "Runs as root: the suites build sandboxes, cgroups, users and network namespaces, \
and remove them again. See docs/benchmarks.md."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: BenchCmd,
}

#[derive(Args, Debug)]
struct Global {
    /// The corral binary to measure (default: `corral` next to this program).
    #[arg(long, global = true, env = "CORRAL_BIN", value_name = "PATH")]
    corral: Option<PathBuf>,
    /// cgroup parent below which every run makes its own (`PARENT/bench-<pid>`).
    #[arg(
        long,
        global = true,
        env = "CORRAL_CGROUP_PARENT",
        default_value = "corral"
    )]
    cgroup_parent: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Cost of one exec: bare, `corral run`, nsenter join, bubblewrap (and firejail, nsjail,
    /// minijail when installed); and of `corral up`.
    Join(BenchArgs),
    /// A CGI program behind nginx under h2load: bare, bubblewrap, nsenter join, corral run,
    /// corral gateway.
    Cgi(BenchArgs),
    /// UnixBench-style micro-benchmarks natively, in a corral sandbox and in bubblewrap.
    Micro(BenchArgs),
    /// getpid, fork+wait, thread create+join at pid-namespace depths 0..3 and in corral.
    Pidns(BenchArgs),
    /// Three virtual hosts (static page, phpinfo() from each tenant's PHP-FPM pool) under load:
    /// alone, together, with a noisy neighbour; without and with corral CPU limits.
    Neighbours(BenchArgs),
    /// 10 … 1,000 (full: 5,000) idle tenants: `corral up`, join latency, memory per tenant,
    /// `corral down --all`.
    Scale(BenchArgs),
    /// ns per system call natively, under a one-instruction seccomp filter (the floor), under
    /// the smallest filter that checks the call's argument (the arg-floor), under corral's
    /// default filter, and in corral (getppid, getpid, read; ioctl, socket, personality, clone,
    /// whose argument the filter reads; pinned and not).
    Seccomp(BenchArgs),
    /// Every suite (join, cgi, micro, pidns, neighbours, scale, seccomp) into one result set.
    All(BenchArgs),
    /// Compare two results.json files: new/old ratio of every median.
    Compare {
        /// The earlier results.json (or the directory holding it).
        old: PathBuf,
        /// The later results.json (or the directory holding it).
        new: PathBuf,
    },
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// About a tenth of the articles' sizes: all suites together take a few minutes.
    #[arg(long, conflicts_with = "smoke")]
    quick: bool,
    /// Tiny sizes to check that everything works (seconds; for CI). The numbers mean nothing.
    #[arg(long)]
    smoke: bool,
    /// Where results.json, report.md and report.html are written.
    #[arg(long, value_name = "DIR", default_value = "corral-bench")]
    out: PathBuf,
    /// Tenants (Unix users), comma-separated; the first one runs the single-tenant workloads.
    #[arg(long, value_name = "A,B", value_delimiter = ',', default_value = DEFAULT_TENANTS)]
    tenants: Vec<String>,
    /// neighbours: CPU cap per tenant in the limited mode, percent of one CPU (default 25).
    #[arg(long, value_name = "PCT", value_parser = clap::value_parser!(u32).range(1..=10000))]
    cpu_limit: Option<u32>,
    /// seccomp: also measure `corral run` through this corral binary (mode `corral-old`) against
    /// the same sandbox. Its init (started by --corral) compiles and installs the filter, so this
    /// measures an older client under the current filter, not an older filter: compare two
    /// filters' programs with bench/c/seccomp.c --bpf.
    #[arg(long, value_name = "PATH")]
    corral_old: Option<PathBuf>,
}

fn main() {
    let cli = Cli::parse();
    let code = match bench(&cli.global, cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("corral-bench: {e:#}");
            EXIT_FAILURE
        }
    };
    std::process::exit(code);
}

/// `--corral`, else `corral` next to this program.
fn corral_path(global: &Global) -> anyhow::Result<PathBuf> {
    if let Some(p) = &global.corral {
        // Absolute: the suites run it from other working directories.
        return std::fs::canonicalize(p)
            .map_err(|e| anyhow::anyhow!("--corral {}: {e}", p.display()));
    }
    let exe = std::env::current_exe()?;
    let p = exe.with_file_name("corral");
    anyhow::ensure!(
        p.is_file(),
        "corral not found next to {} (build it: `source scripts/lib.sh; build_release`, which builds corral-cli and the corral front program; or pass --corral PATH)",
        exe.display()
    );
    Ok(p)
}

/// Writes `text` to stdout; a reader that went away (`corral-bench compare
/// A B | head -1`) ends the program quietly with 141 (128 + SIGPIPE).
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        r => Ok(r?),
    }
}

fn bench(global: &Global, cmd: BenchCmd) -> anyhow::Result<i32> {
    let (suites, a): (&[Suite], BenchArgs) = match cmd {
        BenchCmd::Compare { old, new } => return compare_cmd(global, &old, &new),
        BenchCmd::Join(a) => (&[Suite::Join], a),
        BenchCmd::Cgi(a) => (&[Suite::Cgi], a),
        BenchCmd::Micro(a) => (&[Suite::Micro], a),
        BenchCmd::Pidns(a) => (&[Suite::Pidns], a),
        BenchCmd::Neighbours(a) => (&[Suite::Neighbours], a),
        BenchCmd::Scale(a) => (&[Suite::Scale], a),
        BenchCmd::Seccomp(a) => (&[Suite::Seccomp], a),
        BenchCmd::All(a) => (&Suite::ALL, a),
    };
    for t in &a.tenants {
        corral_users::check_user_name(t)?;
    }
    ensure_default_tenants(&a.tenants)?;
    let level = if a.smoke {
        Level::Smoke
    } else if a.quick {
        Level::Quick
    } else {
        Level::Full
    };
    let opts = Options {
        level,
        corral: corral_path(global)?,
        tenants: a.tenants.clone(),
        json: global.json,
        // Not inside the state dir: that one is private (0700, it holds
        // control sockets), while tenants and the web server must reach the
        // benchmark's work files. Short, because unix socket paths are
        // limited to 107 bytes; every run gets its own directory below it.
        state_base: std::path::PathBuf::from("/run/corral-bench"),
        cgroup_base: global.cgroup_parent.clone(),
        default_profile: corral_profile::DEFAULT_PROFILE.to_string(),
        cpu_limit: a.cpu_limit,
        corral_old: match &a.corral_old {
            Some(p) => Some(
                std::fs::canonicalize(p)
                    .map_err(|e| anyhow::anyhow!("--corral-old {}: {e}", p.display()))?,
            ),
            None => None,
        },
    };
    let outcome = suites::run(&opts, suites);
    if outcome.results.rows.is_empty() {
        // Nothing ran (missing tools, no tenant, not root): no report.
        let e = outcome
            .error
            .map(|e| e.to_string())
            .unwrap_or_else(|| "nothing was measured".into());
        anyhow::bail!("{e}");
    }
    let paths = corral_bench::write_outputs(&a.out, &outcome.results)?;
    let error = outcome.error.as_ref().map(|e| e.to_string());
    if global.json {
        let lines: Vec<Vec<String>> = headline::lines(&outcome.results)
            .into_iter()
            .map(|l| l.to_vec())
            .collect();
        let v = serde_json::json!({
            "results": paths.json, "report_md": paths.markdown, "report_html": paths.html,
            "headline": lines, "error": error,
        });
        emit(&format!("{v}\n"))?;
    } else {
        emit(&format!(
            "{}\nwrote {}, {}, {}\n",
            headline::render(&outcome.results),
            paths.json.display(),
            paths.markdown.display(),
            paths.html.display()
        ))?;
    }
    match outcome.error {
        None => Ok(0),
        Some(BenchError::Interrupted) => {
            eprintln!("corral-bench: interrupted (partial results written)");
            Ok(130)
        }
        Some(e) => {
            eprintln!("corral-bench: {e}");
            Ok(EXIT_FAILURE)
        }
    }
}

/// The default demo tenants are created by scripts/test-users.sh when
/// missing (found next to the source tree this binary was built from).
fn ensure_default_tenants(tenants: &[String]) -> anyhow::Result<()> {
    let users = corral_users::Db::system();
    let missing = |t: &String| users.user_by_name(t).ok().flatten().is_none();
    if !tenants.iter().any(missing) {
        return Ok(());
    }
    let defaults: Vec<&str> = DEFAULT_TENANTS.split(',').collect();
    let wanted: Vec<&String> = tenants.iter().filter(|t| missing(t)).collect();
    anyhow::ensure!(
        wanted.iter().all(|t| defaults.contains(&t.as_str())),
        "no such user: {} (tenants are Unix users)",
        wanted
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-users.sh");
    anyhow::ensure!(
        script.is_file(),
        "the demo tenants {} do not exist: create them with scripts/test-users.sh, or pass --tenants",
        DEFAULT_TENANTS
    );
    eprintln!(
        "corral-bench: creating the demo tenants with {}",
        script.display()
    );
    let st = std::process::Command::new(&script).status()?;
    anyhow::ensure!(st.success(), "{} failed ({st})", script.display());
    Ok(())
}

fn load(p: &Path) -> anyhow::Result<ResultSet> {
    let file = if p.is_dir() {
        p.join(corral_bench::RESULTS_JSON)
    } else {
        p.to_path_buf()
    };
    Ok(ResultSet::load(&file)?)
}

fn compare_cmd(global: &Global, old: &Path, new: &Path) -> anyhow::Result<i32> {
    let (o, n) = (load(old)?, load(new)?);
    let rows = compare::compare(&o, &n);
    if global.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "suite": r.suite, "test": r.test, "mode": r.mode, "figure": r.figure,
                    "unit": r.unit, "better": r.better.as_str(), "old": r.old, "new": r.new,
                    "ratio": r.ratio, "verdict": r.verdict.as_str(),
                })
            })
            .collect();
        emit(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        let note = if o.quick != n.quick {
            "note: one run is quick/smoke and the other is not: the numbers are not comparable\n\n"
        } else {
            ""
        };
        emit(&format!(
            "{note}{}\n{}\n",
            compare::render_plain(&rows),
            compare::summary(&rows)
        ))?;
    }
    Ok(0)
}
