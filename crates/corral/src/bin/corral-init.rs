//! corral-init: pid 1 of a tenant sandbox (see corral_sandbox::init). Started
//! only by `corral up`, which passes the setup socket as fd 3 and the control
//! listener as fd 4.

fn main() {
    if std::env::var_os("CORRAL_INIT_FDS").is_none() {
        eprintln!("corral-init: this is the tenant init; `corral up` starts it, not a user");
        std::process::exit(2);
    }
    corral_sandbox::init::main()
}
