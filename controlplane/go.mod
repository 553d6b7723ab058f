module github.com/sluicegw/sluice/controlplane

go 1.26.0

require (
	github.com/sluicegw/sluice/api v0.0.0
	github.com/sluicegw/sluice/migrations v0.0.0
)

replace github.com/sluicegw/sluice/api => ../api

replace github.com/sluicegw/sluice/migrations => ../migrations
