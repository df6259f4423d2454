//! Mail from inside a sandbox (issue: every way in, part 2, mail): PHP's
//! `mail()` and `sendmail` run in a tenant's sandbox reach a real MTA
//! (Debian's exim4, local delivery only: nothing leaves the machine) through
//! `corral mail-broker`, with the tenant as the envelope sender whatever the
//! script asks, within the plan's `mail.per_hour`, and a refusal is an exit
//! status and a reason, never a silent drop.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The MTA's sendmail (exim4 on Debian: /usr/sbin/sendmail -> exim4). The
/// sandbox gets corral-sendmail bound over the file it resolves to (a bind
/// destination may not be a symlink).
fn mta_binary() -> PathBuf {
    std::fs::canonicalize("/usr/sbin/sendmail")
        .expect("an MTA: /usr/sbin/sendmail (scripts/install-deps.sh installs exim4)")
}

struct Broker {
    child: Child,
    dir: PathBuf,
}

impl Broker {
    fn start(env: &Env) -> Broker {
        let dir = PathBuf::from(format!("/run/corral-mail-test-{}", std::process::id()));
        let log = std::fs::File::create(env.state_dir().join("broker.log")).unwrap();
        let child = env
            .cmd()
            .args(["mail-broker", "--listen"])
            .arg(dir.join("sendmail.sock"))
            .args(["--min-uid", "1000"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start corral mail-broker");
        let b = Broker { child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(b.dir.join("sendmail.sock")).is_err() {
            assert!(Instant::now() < deadline, "the broker did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        b
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The recipient's mailbox, removed afterwards if this test made it.
struct Mailbox {
    path: PathBuf,
    existed: bool,
}

impl Mailbox {
    fn of(user: &str) -> Mailbox {
        let path = Path::new("/var/mail").join(user);
        Mailbox {
            existed: path.exists(),
            path,
        }
    }

    /// The message holding `marker`, waited for up to 15 s (exim delivers
    /// in a background process).
    fn wait_for(&self, marker: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let text = std::fs::read_to_string(&self.path).unwrap_or_default();
            if let Some(msg) = text
                .split("\nFrom ")
                .find(|m| m.contains(marker))
                .map(str::to_string)
            {
                return msg;
            }
            assert!(
                Instant::now() < deadline,
                "no message with {marker} in {}:\n{text}",
                self.path.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        if !self.existed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn header<'a>(msg: &'a str, name: &str) -> Option<&'a str> {
    msg.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(str::trim)
}

#[test]
fn php_mail_leaves_through_the_broker_as_the_tenant_within_its_rate() {
    let env = Env::new();
    let broker = Broker::start(&env);
    env.default_profile_with(&format!(
        "[[mount]]\ntype = \"ro-bind\"\nsrc = \"{}\"\ndst = \"/run/corral-mail\"\n\
         [[mount]]\ntype = \"ro-bind\"\nsrc = \"{}\"\ndst = \"{}\"\n",
        broker.dir.display(),
        corral_bin().with_file_name("corral-sendmail").display(),
        mta_binary().display()
    ));
    env.write_config(
        &format!("tenants/{T1}.toml"),
        "[limits]\nmail.per_hour = 3\n",
    );
    let mailbox = Mailbox::of(T3);
    // Bounces (of the address the MTA refuses below) go to the senders.
    let _bounces = (Mailbox::of(T1), Mailbox::of(T2));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let me = format!("{T1}@{}", host.trim());
    let marker = format!("corral-mail-{}", std::process::id());

    // 1. PHP's mail() (sendmail -t -i), a forged From: header and all.
    let php = format!(
        "var_dump(mail('{T3}@localhost', '{marker} php', 'hello from php', 'From: Boss <boss@bank.example>'));"
    );
    let out = env.ok(&["run", T1, "--", "php", "-r", &php]);
    assert!(out.contains("bool(true)"), "mail() returned: {out}");
    let msg = mailbox.wait_for(&format!("{marker} php"));
    assert_eq!(
        header(&msg, "Return-path"),
        Some(format!("<{me}>").as_str()),
        "{msg}"
    );
    assert!(msg.contains("hello from php"), "{msg}");

    // 2. A forged envelope sender (-f) is not honoured.
    let o = env.run(&[
        "run", T1, "--", "sh", "-c",
        &format!("printf 'Subject: {marker} spoof\\n\\nbody\\n' | /usr/sbin/sendmail -oi -f boss@bank.example {T3}@localhost"),
    ]);
    assert!(
        o.status.success(),
        "sendmail -f: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let msg = mailbox.wait_for(&format!("{marker} spoof"));
    assert_eq!(
        header(&msg, "Return-path"),
        Some(format!("<{me}>").as_str()),
        "{msg}"
    );

    // 3. The third message this hour goes; the fourth is refused, with the
    //    reason and EX_TEMPFAIL; PHP's mail() says false.
    let send = |subject: &str| {
        env.run(&[
            "run",
            T1,
            "--",
            "sh",
            "-c",
            &format!(
                "printf 'Subject: {subject}\\n\\nbody\\n' | /usr/sbin/sendmail -i {T3}@localhost"
            ),
        ])
    };
    let o = send(&format!("{marker} third"));
    assert!(
        o.status.success(),
        "third: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    mailbox.wait_for(&format!("{marker} third"));
    let o = send(&format!("{marker} fourth"));
    assert_eq!(o.status.code(), Some(75), "fourth: {:?}", o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("rate limit") && err.contains("mail.per_hour"),
        "{err}"
    );
    let out = env.ok(&["run", T1, "--", "php", "-r", &php]);
    assert!(
        out.contains("bool(false)"),
        "mail() over the limit returned: {out}"
    );
    let log = std::fs::read_to_string(env.state_dir().join("broker.log")).unwrap();
    assert!(
        log.contains(&format!("{T1}: refused: {T1}: mail rate limit reached")),
        "{log}"
    );

    // 4. What the MTA refuses is not dropped: its status and words reach
    //    the script (T2 has no rate limit).
    let o = env.run(&[
        "run",
        T2,
        "--",
        "sh",
        "-c",
        "printf 'Subject: x\\n\\nbody\\n' | /usr/sbin/sendmail -i 'a@@b'",
    ]);
    assert!(!o.status.success(), "a malformed address went through");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the MTA refused the message"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // 5. Without the broker: a clear error and EX_UNAVAILABLE.
    drop(broker);
    let o = send("no broker");
    assert_eq!(o.status.code(), Some(69), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("mail broker is not reachable"));
}
