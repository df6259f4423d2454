//! `corral check` and `corral profile`.

use crate::cli::{CheckArgs, ProfileCmd};
use crate::ctx::Ctx;
use crate::out::{out, outln};

pub fn check(ctx: &Ctx, a: CheckArgs) -> anyhow::Result<i32> {
    let file = a
        .file
        .unwrap_or_else(|| ctx.config_dir.join("profile.toml"));
    if file.exists() {
        corral_profile::check_file(&file)?;
        outln!("{}: ok", file.display());
    } else if a.tenant.is_none() {
        anyhow::bail!(
            "{}: no such file (the built-in default profile is used when it is absent)",
            file.display()
        );
    }
    if let Some(t) = a.tenant {
        let plan = corral_profile::load(&ctx.config_dir, &t)?;
        corral_limits::Limits::from_source(&plan.limits)?;
        outln!("tenant {t}: ok (digest {})", &plan.digest()[..12]);
    }
    Ok(0)
}

pub fn profile(ctx: &Ctx, p: ProfileCmd) -> anyhow::Result<i32> {
    match p {
        ProfileCmd::Default => out!("{}", corral_profile::DEFAULT_PROFILE),
        ProfileCmd::Show { tenant } => {
            let plan = corral_profile::load(&ctx.config_dir, &tenant)?;
            if ctx.json {
                outln!("{}", serde_json::to_string_pretty(&plan)?);
            } else {
                out!("{}", corral_profile::render(&plan));
            }
        }
    }
    Ok(0)
}
