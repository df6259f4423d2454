//! `corral mail-broker`: the host side of mail from sandboxes (the
//! corral-mail crate). This file turns the command line into a broker and
//! tells it where a tenant's `mail.per_hour` comes from.

use crate::ctx::Ctx;
use corral_mail::broker::{serve, Broker};
use corral_mail::rate::{RateLimiter, HOUR};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct MailBrokerArgs {
    /// The socket to listen on. Sandboxes reach it when the profile binds its
    /// directory on /run/corral-mail (docs/access.md); the socket is
    /// world-connectable (the broker knows every peer by its uid).
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/run/corral-mail/sendmail.sock"
    )]
    pub listen: PathBuf,
    /// The host's sendmail (exim4's or postfix's).
    #[arg(long, value_name = "PATH", default_value = "/usr/sbin/sendmail")]
    pub sendmail: PathBuf,
    /// Users below this uid are not tenants (default: UID_MIN of /etc/login.defs, else 1000).
    #[arg(long, value_name = "UID")]
    pub min_uid: Option<u32>,
    /// Seconds the MTA may take to accept a message.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
}

pub fn broker(ctx: &Ctx, a: MailBrokerArgs) -> anyhow::Result<i32> {
    let min_uid = a.min_uid.unwrap_or_else(|| {
        std::fs::read_to_string("/etc/login.defs")
            .ok()
            .and_then(|t| corral_access::config::login_defs_uid_min(&t))
            .unwrap_or(1000)
    });
    anyhow::ensure!(
        a.sendmail.is_absolute(),
        "--sendmail {}: expected an absolute path",
        a.sendmail.display()
    );
    let dir = a
        .listen
        .parent()
        .ok_or_else(|| anyhow::anyhow!("--listen {}: no directory", a.listen.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    match std::fs::remove_file(&a.listen) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("{}: {e}", a.listen.display()),
    }
    let listener = std::os::unix::net::UnixListener::bind(&a.listen)
        .map_err(|e| anyhow::anyhow!("listen on {}: {e}", a.listen.display()))?;
    std::fs::set_permissions(&a.listen, std::fs::Permissions::from_mode(0o666))?;
    let config_dir = ctx.config_dir.clone();
    let limit_of = move |user: &corral_users::User| -> Result<Option<u32>, String> {
        let plan = corral_profile::load(&config_dir, &user.name).map_err(|e| e.to_string())?;
        let limits = corral_limits::Limits::from_source(&plan.limits).map_err(|e| e.to_string())?;
        Ok(limits.mail_per_hour)
    };
    let broker = Arc::new(Broker {
        sendmail: a.sendmail,
        min_uid,
        limit_of: Box::new(limit_of),
        rate: Mutex::new(RateLimiter::new(HOUR)),
        timeout: Duration::from_secs(a.timeout),
    });
    eprintln!("corral mail-broker: listening on {}", a.listen.display());
    serve(listener, broker)?;
    Ok(0)
}
