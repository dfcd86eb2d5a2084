package api

import (
	"net/http"

	"github.com/xdp5g/xdp5g/internal/cuup"
	"github.com/xdp5g/xdp5g/internal/e1"
)

// BearerContexts is the body of GET /api/v1/cuup/bearer-contexts.
type BearerContexts struct {
	BearerContexts []cuup.Context `json:"bearerContexts"`
}

var errNoCUUP = &Error{Status: http.StatusNotFound, Msg: "the CU-UP is not configured"}

// cuUP answers 404 for the CU-UP's resources while the daemon runs none.
func (s *server) cuUP(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) (int, any, error) {
		if s.cuup == nil {
			return 0, nil, errNoCUUP
		}
		return h(w, r)
	}
}

func (s *server) listBearerContexts(w http.ResponseWriter, r *http.Request) (int, any, error) {
	return http.StatusOK, BearerContexts{BearerContexts: s.cuup.List()}, nil
}

func (s *server) setupBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req e1.BearerContextSetupRequest
	if err := decodeBody(w, r, &req); err != nil {
		return 0, nil, err
	}
	resp, err := s.cuup.Setup(req)
	return http.StatusCreated, resp, err
}

func pathBearerContextID(r *http.Request) (uint32, error) {
	id, err := pathNumber(r, "id", 32, "a gNB-CU-UP UE E1AP ID")
	return uint32(id), err
}

func (s *server) getBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	c, err := s.cuup.Get(id)
	return http.StatusOK, c, err
}

func (s *server) modifyBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	var req e1.BearerContextModificationRequest
	if err := decodeBody(w, r, &req); err != nil {
		return 0, nil, err
	}
	resp, err := s.cuup.Modify(id, req)
	return http.StatusOK, resp, err
}

func (s *server) releaseBearerContext(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathBearerContextID(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, s.cuup.Release(id)
}
