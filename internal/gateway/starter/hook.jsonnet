// A Metacontroller sync hook: the request holds the parent object and the children
// it has now; the answer is the parent's status and the children it should have.
// Use it as a CompositeController's sync hook, with ConfigMaps as its child resource.
function(request)
  local parent = request.parent;
  local name = parent.metadata.name;
  local spec = std.get(parent, 'spec', {});
  local observed = std.length(std.objectFields(std.get(std.get(request, 'children', {}), 'ConfigMap.v1', {})));
  std.trace('syncing %s with %d ConfigMap(s)' % [name, observed], {
    status: { configMaps: observed },
    children: [{
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: name + '-message' },
      data: { message: std.get(spec, 'message', 'hello') },
    }],
    // Events are recorded on the parent, where `kubectl describe` shows them: type
    // Normal or Warning, reason in UpperCamelCase, at most 10 an answer. (Upstream
    // Metacontroller ignores them, and refuses them under responseUnMarshallMode strict.)
    events: if observed == 0 then [{
      type: 'Normal',
      reason: 'CreatingConfigMap',
      message: 'creating ConfigMap %s-message' % name,
    }] else [],
  })
