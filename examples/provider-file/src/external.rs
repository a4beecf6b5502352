//! The File's external client: the file system. `observe` reads the file, `create` and `update` write
//! it, `delete` removes it. Every call is idempotent, as the managed reconciler requires.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use apis::Condition;
use kube::Resource;
use managed::{
    ExternalClient, ExternalConnector, ExternalCreation, ExternalDelete, ExternalError, ExternalObservation,
    ExternalUpdate, Managed, meta,
};
use manager::Fence;

use crate::File;

/// Connects to the local disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileConnector;

/// Talks to the local disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileClient;

impl ExternalConnector<File> for FileConnector {
    type Client = FileClient;

    async fn connect(&self, _: &kube::Client, _: &Fence, _: &File) -> Result<FileClient, ExternalError> {
        Ok(FileClient)
    }
}

/// Where the File lives: `<directory>/<external name>`. Refuses a relative directory and a name that is
/// not a single path component, so a resource cannot point outside its directory.
pub fn path_of(mr: &File) -> Result<PathBuf, ExternalError> {
    let dir = Path::new(&mr.spec.for_provider.directory);
    if !dir.is_absolute() {
        return Err(ExternalError::new(format!(
            "spec.forProvider.directory {:?} must be an absolute path",
            mr.spec.for_provider.directory
        )));
    }
    let name = meta::external_name(mr.meta()).unwrap_or_default();
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(ExternalError::new(format!(
            "the external name {name:?} must be a file name (no '/', not '.' or '..')"
        )));
    }
    Ok(dir.join(name))
}

fn write(mr: &File) -> Result<(), ExternalError> {
    let path = path_of(mr)?;
    std::fs::write(&path, &mr.spec.for_provider.content)
        .map_err(|e| ExternalError::wrap(format!("cannot write {}", path.display()), e))
}

impl ExternalClient<File> for FileClient {
    async fn observe(&mut self, mr: &mut File) -> Result<ExternalObservation, ExternalError> {
        let path = path_of(mr)?;
        let content = match std::fs::read(&path) {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(ExternalObservation::default()),
            Err(e) => return Err(ExternalError::wrap(format!("cannot read {}", path.display()), e)),
        };
        apis::condition::set(mr.conditions_mut(), [Condition::available()]);
        Ok(ExternalObservation {
            resource_exists: true,
            resource_up_to_date: content == mr.spec.for_provider.content.as_bytes(),
            ..ExternalObservation::default()
        })
    }

    async fn create(&mut self, mr: &mut File) -> Result<ExternalCreation, ExternalError> {
        write(mr)?;
        Ok(ExternalCreation::default())
    }

    async fn update(&mut self, mr: &mut File) -> Result<ExternalUpdate, ExternalError> {
        write(mr)?;
        Ok(ExternalUpdate::default())
    }

    async fn delete(&mut self, mr: &mut File) -> Result<ExternalDelete, ExternalError> {
        let path = path_of(mr)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(ExternalDelete::default()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(ExternalDelete::default()),
            Err(e) => Err(ExternalError::wrap(
                format!("cannot remove {}", path.display()),
                e,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileParameters, FileSpec};

    fn file(directory: &str, external_name: &str) -> File {
        let mut f = File::new(
            "f",
            FileSpec {
                resource_spec: apis::ResourceSpec::default(),
                for_provider: FileParameters {
                    directory: directory.into(),
                    content: String::new(),
                },
            },
        );
        meta::set_external_name(f.meta_mut(), external_name);
        f
    }

    #[test]
    fn the_path_stays_inside_an_absolute_directory() {
        let p = path_of(&file("/srv/files", "a.txt")).expect("valid");
        assert_eq!(p, PathBuf::from("/srv/files/a.txt"));
        let e = path_of(&file("srv", "a.txt")).expect_err("relative");
        assert!(e.to_string().contains("must be an absolute path"), "{e}");
        for bad in ["", ".", "..", "../etc/passwd", "a/b"] {
            let e = path_of(&file("/srv", bad)).expect_err(bad);
            assert!(e.to_string().contains("must be a file name"), "{bad}: {e}");
        }
    }
}
