//! Mail out of a sandbox.
//!
//! A tenant's PHP `mail()` runs `sendmail -t -i`. The host's sendmail cannot
//! work inside a sandbox: it needs a setuid or setgid helper (exim4 is
//! setuid root, postfix's postdrop setgid) and every sandboxed process has
//! `no_new_privs`. So the sandbox gets [`client`] in its place
//! (`corral-sendmail`, bound over `/usr/sbin/sendmail`), which passes the
//! message over a unix socket bound into the sandbox to the [`broker`] on
//! the host (`corral mail-broker`). The broker knows the sender by the
//! socket's peer credentials (a uid the tenant cannot forge), counts the
//! tenant's messages against its plan's `mail.per_hour`, and runs the
//! host's sendmail **as the tenant** (its uid, gid and groups, outside the
//! sandbox): the MTA then sets the envelope sender to the tenant and treats
//! it as the untrusted local user it is (a forged `-f` is not honoured). A
//! refused or failed message is never dropped silently: the caller gets a
//! non-zero exit status and the reason on stderr, and the broker logs it.

pub mod args;
pub mod broker;
pub mod client;
pub mod proto;
pub mod rate;
