//! `pam_corral.so`: a PAM session module that places a login session in the
//! tenant's corral sandbox.
//!
//! ```text
//! # /etc/pam.d/sshd, /etc/pam.d/cron, /etc/pam.d/su: last in the session stack
//! session required pam_corral.so [config=/etc/corral/access.toml] [debug]
//! ```
//!
//! `pam_sm_open_session` runs in the process that opens the session, as
//! root: sshd's monitor, cron's per-job process, su. For a caged user
//! (`corral_access::config`) that process enters the tenant's sandbox and
//! hardens itself (`corral_access::session::enter_session`), so every
//! process it then starts for the user is born inside the sandbox's
//! namespaces and cgroup, under the seccomp filter, with no capability to
//! gain. A user who is not caged passes untouched. A caged user whose
//! sandbox cannot be entered gets PAM_SESSION_ERR: with `required` the
//! application refuses the session (fail closed).
//!
//! The FFI surface is five libpam functions; they are declared here rather
//! than through a binding crate.

use corral_access::config::{AccessConfig, DEFAULT_PATH};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;

#[allow(non_camel_case_types)]
type pam_handle_t = c_void;

const PAM_SUCCESS: c_int = 0;
const PAM_SESSION_ERR: c_int = 14;
const PAM_USER: c_int = 2;
const PAM_CONV: c_int = 5;
const PAM_ERROR_MSG: c_int = 3;

#[repr(C)]
struct PamMessage {
    msg_style: c_int,
    msg: *const c_char,
}

#[repr(C)]
struct PamResponse {
    resp: *mut c_char,
    resp_retcode: c_int,
}

#[repr(C)]
struct PamConv {
    conv: Option<
        unsafe extern "C" fn(
            c_int,
            *mut *const PamMessage,
            *mut *mut PamResponse,
            *mut c_void,
        ) -> c_int,
    >,
    appdata_ptr: *mut c_void,
}

#[link(name = "pam")]
extern "C" {
    fn pam_get_item(pamh: *const pam_handle_t, item_type: c_int, item: *mut *const c_void)
        -> c_int;
    fn pam_putenv(pamh: *mut pam_handle_t, name_value: *const c_char) -> c_int;
}

/// The module's arguments.
#[derive(Debug, PartialEq)]
struct Args {
    config: Option<PathBuf>,
    debug: bool,
}

fn parse_args(args: &[&str]) -> Result<Args, String> {
    let mut a = Args {
        config: None,
        debug: false,
    };
    for arg in args {
        match arg.split_once('=') {
            Some(("config", v)) if v.starts_with('/') => a.config = Some(PathBuf::from(v)),
            None if *arg == "debug" => a.debug = true,
            _ => {
                return Err(format!(
                    "unknown argument {arg:?} (expected config=/ABSOLUTE/PATH or debug)"
                ))
            }
        }
    }
    Ok(a)
}

fn log(priority: c_int, msg: &str) {
    let text = CString::new(format!("pam_corral: {msg}").replace('\0', " ")).unwrap_or_default();
    // SAFETY: a constant "%s" format and a NUL-terminated argument.
    unsafe { libc::syslog(libc::LOG_AUTHPRIV | priority, c"%s".as_ptr(), text.as_ptr()) };
}

/// Tell the user why (through the application's conversation, when it has
/// one), besides the log.
fn tell(pamh: *mut pam_handle_t, msg: &str) {
    let mut item: *const c_void = std::ptr::null();
    // SAFETY: pam_get_item stores a pointer owned by libpam into `item`.
    if unsafe { pam_get_item(pamh, PAM_CONV, &mut item) } != PAM_SUCCESS || item.is_null() {
        return;
    }
    // SAFETY: libpam's PAM_CONV item is a `struct pam_conv`.
    let conv = unsafe { &*(item as *const PamConv) };
    let Some(f) = conv.conv else { return };
    let Ok(text) = CString::new(format!("corral: {msg}").replace('\0', " ")) else {
        return;
    };
    let m = PamMessage {
        msg_style: PAM_ERROR_MSG,
        msg: text.as_ptr(),
    };
    let mut mp: *const PamMessage = &m;
    let mut resp: *mut PamResponse = std::ptr::null_mut();
    // SAFETY: one message, as the conversation protocol defines it; a
    // response the application allocated is freed as libpam documents.
    unsafe {
        f(1, &mut mp, &mut resp, conv.appdata_ptr);
        if !resp.is_null() {
            if !(*resp).resp.is_null() {
                libc::free((*resp).resp.cast());
            }
            libc::free(resp.cast());
        }
    }
}

fn user_name(pamh: *mut pam_handle_t) -> Option<String> {
    let mut item: *const c_void = std::ptr::null();
    // SAFETY: pam_get_item stores a pointer owned by libpam into `item`.
    if unsafe { pam_get_item(pamh, PAM_USER, &mut item) } != PAM_SUCCESS || item.is_null() {
        return None;
    }
    // SAFETY: PAM_USER is a NUL-terminated string owned by libpam.
    let s = unsafe { CStr::from_ptr(item.cast()) };
    s.to_str().ok().map(str::to_string)
}

/// Collect argv into strings.
///
/// # Safety
/// `argv` points to `argc` NUL-terminated strings (libpam's module arguments).
unsafe fn args<'a>(argc: c_int, argv: *const *const c_char) -> Vec<&'a str> {
    (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: per this function's contract.
        .filter_map(|i| unsafe { CStr::from_ptr(*argv.add(i)) }.to_str().ok())
        .collect()
}

fn open_session(pamh: *mut pam_handle_t, args: &[&str]) -> c_int {
    let refuse = |msg: String| {
        log(libc::LOG_ERR, &msg);
        tell(pamh, &format!("session refused: {msg}"));
        PAM_SESSION_ERR
    };
    let args = match parse_args(args) {
        Ok(a) => a,
        Err(e) => return refuse(e),
    };
    let Some(name) = user_name(pamh) else {
        return refuse("no user name for the session".into());
    };
    let db = corral_users::Db::system();
    let user = match db.user_by_name(&name) {
        Ok(Some(u)) => u,
        // An unknown user is no tenant; the application refuses it anyway.
        Ok(None) => return PAM_SUCCESS,
        Err(e) => return refuse(format!("{name}: user database: {e}")),
    };
    let (path, explicit) = match &args.config {
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(DEFAULT_PATH), false),
    };
    let cfg = match AccessConfig::load(&path, explicit) {
        Ok(c) => c,
        Err(e) => return refuse(e.to_string()),
    };
    match cfg.caged(&db, &user) {
        Ok(true) => {}
        Ok(false) => {
            if args.debug {
                log(libc::LOG_DEBUG, &format!("{name}: not caged"));
            }
            return PAM_SUCCESS;
        }
        Err(e) => return refuse(e.to_string()),
    }
    let session = match corral_access::session::enter_session(&cfg, &name) {
        Ok(s) => s,
        Err(e) => return refuse(e.to_string()),
    };
    for (k, v) in &session.env {
        if let Ok(kv) = CString::new(format!("{k}={v}")) {
            // SAFETY: a NUL-terminated NAME=VALUE string; libpam copies it.
            unsafe { pam_putenv(pamh, kv.as_ptr()) };
        }
    }
    if args.debug {
        log(
            libc::LOG_DEBUG,
            &format!("{name}: session placed in its sandbox"),
        );
    }
    // The entry-process slot stays held for as long as this process (the
    // session) lives; it is released when the process exits.
    std::mem::forget(session.entered);
    PAM_SUCCESS
}

/// # Safety
/// Called by libpam with a valid handle and `argc` NUL-terminated arguments.
#[no_mangle]
pub unsafe extern "C" fn pam_sm_open_session(
    pamh: *mut pam_handle_t,
    _flags: c_int,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    // SAFETY: per this function's contract.
    let a = unsafe { args(argc, argv) };
    // A panic must not unwind into C.
    std::panic::catch_unwind(|| open_session(pamh, &a)).unwrap_or_else(|_| {
        log(libc::LOG_ERR, "internal error");
        PAM_SESSION_ERR
    })
}

/// Nothing to undo: the session's processes end with it, and the entry
/// slot is released when the process that opened the session exits.
///
/// # Safety
/// Called by libpam.
#[no_mangle]
pub unsafe extern "C" fn pam_sm_close_session(
    _pamh: *mut pam_handle_t,
    _flags: c_int,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    PAM_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_arguments() {
        assert_eq!(
            parse_args(&["config=/etc/x.toml", "debug"]).unwrap(),
            Args {
                config: Some("/etc/x.toml".into()),
                debug: true
            }
        );
        assert!(parse_args(&["config=relative.toml"]).is_err());
        assert!(parse_args(&["nosuch"]).unwrap_err().contains("nosuch"));
    }
}
