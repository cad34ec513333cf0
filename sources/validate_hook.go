package sources

import (
	"github.com/gitfleet/gitfleet/schemas"
	"github.com/gitfleet/gitfleet/schemas/v1alpha1"
)

// TODO(schemas): call schemas.Check once the schemas package implements it;
// until then cross-object rules and policies are not checked here.
var checkFleet = func(objs []schemas.Object, _ []schemas.File) (*v1alpha1.Fleet, schemas.Errors) {
	return &v1alpha1.Fleet{}, nil
}

var parseFile = schemas.ParseFile
