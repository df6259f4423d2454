//! `$USER`, `$UID`, `$GID`, `$HOME` (also `${USER}`...) in string values;
//! `$$` is a literal `$`.

use crate::doc::L;
use crate::error::ProfileError;
use crate::plan::Tenant;

const VARIABLES: &str =
    "one of the variables $USER, $UID, $GID, $HOME (also written ${USER}...), or $$ for a literal $";

/// Expand the variables of a string value for `tenant`.
pub(crate) fn expand(l: &L<String>, tenant: &Tenant) -> Result<String, ProfileError> {
    let mut out = String::with_capacity(l.v.len());
    let mut rest = l.v.as_str();
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, consumed) = if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        } else if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => return Err(l.invalid(VARIABLES, format!("unclosed \"${{\" in {:?}", l.v))),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        let value = match name {
            "USER" => tenant.name.clone(),
            "UID" => tenant.uid.to_string(),
            "GID" => tenant.gid.to_string(),
            "HOME" => tenant.home.to_string_lossy().into_owned(),
            "" => return Err(l.invalid(VARIABLES, format!("a lone \"$\" in {:?}", l.v))),
            other => return Err(l.invalid(VARIABLES, format!("${other}"))),
        };
        out.push_str(&value);
        rest = &after[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}
