//! `corral-shell`: a login shell that runs the tenant's shell inside its
//! sandbox. See `corral_access::shell` and docs/access.md.

fn main() {
    std::process::exit(corral_access::shell::main());
}
