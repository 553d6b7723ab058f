module github.com/sluicegw/sluice/migrations

go 1.26.0
