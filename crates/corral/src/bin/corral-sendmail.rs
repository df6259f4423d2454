//! `corral-sendmail`: `/usr/sbin/sendmail` inside a sandbox. It hands the
//! message to the mail broker on the host (`corral mail-broker`), which
//! sends it with the tenant as the sender. See corral_mail and
//! docs/access.md.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let socket = std::path::Path::new(corral_mail::client::SOCKET);
    std::process::exit(corral_mail::client::main(&args, socket));
}
