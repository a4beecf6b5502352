//! provider-file on the real control plane, as a process: a File is created on disk, kept in step with
//! its spec, and removed when the resource is deleted; a bad directory is a clear `Synced=False`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use apis::condition::{TYPE_READY, TYPE_SYNCED, is_true};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, CustomResourceExt};
use provider_file::File;
use testenv::support::{Process, cluster, eventually, install_crds, replica_args};

const BIN: &str = env!("CARGO_BIN_EXE_provider-file");
const WAIT: Duration = Duration::from_secs(60);

fn dir(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("provider-file")
        .join(test)
}

fn file(name: &str, ns: &str, directory: &Path, content: &str) -> Result<File> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "file.example.crossplane-rs.io/v1alpha1",
        "kind": "File",
        "metadata": { "name": name, "labels": { "test": ns } },
        "spec": { "forProvider": { "directory": directory, "content": content } },
    }))?)
}

fn conditions(f: &File) -> &[apis::Condition] {
    f.status
        .as_ref()
        .map(|s| s.resource_status.conditions.as_slice())
        .unwrap_or(&[])
}

#[tokio::test]
async fn a_file_follows_its_resource() -> Result<()> {
    let c = cluster();
    let client = c.client().await?;
    install_crds(&client, &[File::crd()]).await?;
    let ns = c.namespace("file").await?;
    let root = dir(&ns);
    std::fs::create_dir_all(&root)?;
    let logs = dir("logs");
    let mut args = replica_args(
        &c,
        &ns,
        "crossplane-leader-election-provider-file",
        &format!("{ns}-a"),
    );
    args.extend(["--poll", "2s"].map(String::from));
    let provider = Process::start(BIN, &logs, &format!("{ns}-a"), &args)?;

    let api: Api<File> = Api::all(client.clone());
    let name = format!("{ns}-hello");
    let path = root.join(&name);
    api.create(&PostParams::default(), &file(&name, &ns, &root, "hello")?)
        .await?;
    eventually(
        "the file is written and the resource Ready and Synced",
        WAIT,
        || async {
            let f = api.get(&name).await?;
            let written = std::fs::read_to_string(&path).unwrap_or_default();
            Ok(written == "hello"
                && is_true(conditions(&f), TYPE_READY)
                && is_true(conditions(&f), TYPE_SYNCED))
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\nprovider log:\n{}", provider.log_text()))?;

    // A change of the spec reaches the file.
    let patch = serde_json::json!({ "spec": { "forProvider": { "content": "hello again" } } });
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    eventually("the file is updated", WAIT, || async {
        Ok(std::fs::read_to_string(&path).unwrap_or_default() == "hello again")
    })
    .await?;

    // Drift on disk is corrected at the next poll.
    std::fs::write(&path, "tampered")?;
    eventually("the drift is corrected", WAIT, || async {
        Ok(std::fs::read_to_string(&path).unwrap_or_default() == "hello again")
    })
    .await?;

    // A relative directory is refused with a message saying what is wrong; nothing is written.
    let bad = format!("{ns}-bad");
    api.create(
        &PostParams::default(),
        &file(&bad, &ns, Path::new("relative/dir"), "x")?,
    )
    .await?;
    eventually(
        "the bad File is Synced=False naming the directory",
        WAIT,
        || async {
            let f = api.get(&bad).await?;
            let synced = apis::condition::get(conditions(&f), TYPE_SYNCED);
            Ok(synced.is_some_and(|s| {
                s.status.as_str() == "False"
                    && s.message
                        .as_deref()
                        .unwrap_or_default()
                        .contains("must be an absolute path")
            }))
        },
    )
    .await?;

    // Deleting the resource removes the file, then the resource. (The bad one never got a finalizer.)
    api.delete(&bad, &DeleteParams::default()).await?;
    api.delete(&name, &DeleteParams::default()).await?;
    eventually("the file and the resource are gone", WAIT, || async {
        Ok(!path.exists() && api.get_opt(&name).await?.is_none())
    })
    .await?;
    drop(provider);
    Ok(())
}
