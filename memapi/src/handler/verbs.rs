//! Each verb of a resource against the store.

use super::listing::{list, list_response, watch};
use super::*;

/// Serves one authorized request of a resource: runs its verb against
/// the store (a review answered from the access table).
pub(super) fn serve(
    shared: &Arc<Shared>,
    req: &Req<'_>,
) -> Result<http::Response<ResponseBody>, ApiError> {
    let kind = req.res.kind;
    if kind.is_review() {
        if req.verb != Verb::Create {
            return Err(ApiError::from_code(
                405,
                format!("{} can only be created", kind.plural),
            ));
        }
        let body = req.object()?;
        let answer = reviews::answer(&lock(&shared.access), kind.kind, body)?;
        return Ok(req.respond_object(201, &answer));
    }
    let url_ns = req.res.namespace.as_deref();
    match req.verb {
        Verb::Get => {
            let obj = lock(&shared.store)
                .get(kind, req.namespace(), req.name())
                .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, req.name()))?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::List => list(shared, req),
        Verb::Watch => watch(shared, req),
        Verb::Create => {
            let body = req.object()?;
            let obj = ops::create(
                &mut lock(&shared.store),
                kind,
                url_ns,
                body,
                Origin::Api(req.user, req.manager()),
            )?;
            Ok(req.respond_object(201, &obj))
        }
        Verb::Update => {
            let body = req.object()?;
            let obj = ops::update(
                &mut lock(&shared.store),
                kind,
                url_ns,
                req.name(),
                body,
                req.part(),
                req.writer(),
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::Patch => {
            let patch_type = PatchType::from_content_type(req.content_type).ok_or_else(|| {
                ApiError::from_code(
                    415,
                    format!(
                        "the patch content type {:?} is not supported",
                        req.content_type
                    ),
                )
            })?;
            let request = ops::PatchRequest {
                patch_type,
                body: req.body,
                field_manager: req.query.get("fieldManager"),
                force: req.query.flag("force"),
            };
            let obj = ops::patch(
                &mut lock(&shared.store),
                kind,
                url_ns,
                req.name(),
                &request,
                req.part(),
                req.writer(),
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::Delete => {
            let options = req.delete_options()?;
            let obj = delete::delete(
                &mut lock(&shared.store),
                kind,
                req.namespace(),
                req.name(),
                options.as_ref(),
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::DeleteCollection => {
            let options = req.delete_options()?;
            let filter = req.filter()?;
            let answers = delete::delete_collection(
                &mut lock(&shared.store),
                kind,
                &filter,
                options.as_ref(),
            )?;
            let metadata = json!({ "resourceVersion": lock(&shared.store).rv().to_string() });
            Ok(list_response(kind, &metadata, &answers))
        }
    }
}
