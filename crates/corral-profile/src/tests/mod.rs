//! Unit tests. They look up real users (`nobody`, `root`) in passwd.

mod errors;
mod expand;
mod load;
mod merge;
mod output;
mod services;

use crate::build::{assemble, Input};
use crate::limits::LimitsPlanFile;
use crate::plan::Plan;
use crate::{check_str, tenant, ProfileError};
use std::path::Path;

pub(crate) const PROFILE: &str = "/etc/corral/profile.toml";

/// The error `check_str` gives for `text`, as displayed.
pub(crate) fn check_err(text: &str) -> String {
    match check_str(text, Path::new(PROFILE)) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// The plan of the stand-in tenant `example` for a template and an override.
pub(crate) fn example_plan(template: &str, over: Option<&str>) -> Result<Plan, ProfileError> {
    let over = over.map(|text| Input {
        text,
        path: Path::new("/etc/corral/tenants/example.toml"),
    });
    let template = Input {
        text: template,
        path: Path::new(PROFILE),
    };
    assemble(
        template,
        over,
        tenant::example(),
        LimitsPlanFile::TemplateOnly,
    )
}
