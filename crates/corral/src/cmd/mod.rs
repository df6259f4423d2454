//! One module per subcommand family.

mod accounts;
pub mod cgi;
pub mod docs;
pub mod gateway;
pub mod history;
mod limits;
pub mod mail;
pub mod metrics;
mod profile;
mod run;
mod service;
mod suspend;
mod tenants;

use crate::cli::Command;
use crate::ctx::Ctx;

pub fn dispatch(ctx: &Ctx, cmd: Command) -> anyhow::Result<i32> {
    match cmd {
        Command::Up(a) => tenants::up(ctx, &a.tenants),
        Command::Down(a) => {
            let names = if a.all { ctx.layout.list()? } else { a.tenants };
            let code = tenants::down(ctx, &names)?;
            if a.all {
                tenants::prune_cgroup_parent(ctx);
            }
            Ok(code)
        }
        Command::Restart(a) => tenants::restart(ctx, &a.tenants),
        Command::Ls => tenants::ls(ctx),
        Command::Run(a) => run::run(ctx, a),
        Command::Check(a) => profile::check(ctx, a),
        Command::Profile(p) => profile::profile(ctx, p),
        Command::Limits(c) => limits::limits(ctx, c),
        Command::Plan(c) => limits::plan(ctx, c),
        Command::Suspend(a) => suspend::suspend(ctx, &a.tenant, a.reason),
        Command::Tenant(crate::cli::TenantCmd::Remove { tenant, dry_run }) => {
            accounts::remove(ctx, &tenant, dry_run)
        }
        Command::Gc { dry_run } => accounts::gc(ctx, dry_run),
        Command::TmpClean {
            tenants,
            older_than,
            dry_run,
        } => accounts::tmp_clean(ctx, &tenants, older_than, dry_run),
        Command::Unsuspend(a) => suspend::unsuspend(ctx, &a.tenant),
        Command::Stats(a) => limits::stats(ctx, a),
        Command::Top(a) => limits::top(ctx, a),
        Command::Gateway(a) => gateway::gateway(ctx, a),
        Command::Cgi(a) => cgi::cgi(ctx, a),
        Command::MailBroker(a) => mail::broker(ctx, a),
        Command::Service(c) => service::service(ctx, c),
        Command::Metrics(c) => metrics::metrics(ctx, c),
        Command::Daemon(a) => history::daemon(ctx, a),
        Command::History(a) => history::history(ctx, a),
    }
}
